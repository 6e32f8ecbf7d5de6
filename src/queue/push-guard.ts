/**
 * Which addresses a push may reach (docs/push.md, Security): a target whose host is, or
 * resolves to, an INTERNAL address is refused unless the operator allows it. Checked when a
 * target is set, and again at every connection (DNS rebinding): the sockets' `lookup`, and
 * literal IP hosts (no lookup) before each request.
 */

import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { TickwheelError, TickwheelTypeError } from '../errors.js';
import { describe } from '../validate.js';

export interface PushOptions {
  /**
   * Internal addresses pushes may reach: CIDR blocks (`10.1.0.0/16`), addresses (`127.0.0.1`),
   * or host names matched exactly (`receiver.internal`). At most 1,000 entries. Default none.
   */
  allow?: readonly string[];
}

export const MAX_PUSH_ALLOW = 1000;
/** How long setting a target waits for its name to resolve (then lets it through). */
const SET_LOOKUP_MS = 5000;

/** A push target whose host is an internal address that the queue's options do not allow. */
export class PushNotAllowedError extends TickwheelError<'ERR_TICKWHEEL_PUSH_NOT_ALLOWED'> {
  readonly host: string;
  readonly address: string;
  constructor(host: string, address: string, kind: string) {
    const named = host === address ? address : `${host} (${address})`;
    super(
      'ERR_TICKWHEEL_PUSH_NOT_ALLOWED',
      `push target ${named} is a ${kind} address, refused so that pushes cannot reach ` +
        "services inside the queue's network. To push there, allow it: the queue option " +
        `push: { allow: ['${address}'] } (a CIDR block or a host name), or ` +
        `tickwheel serve --push-allow ${address}`,
    );
    this.name = 'PushNotAllowedError';
    this.host = host;
    this.address = address;
  }
}

type Bytes = readonly number[];

interface Block {
  bytes: Bytes;
  prefix: number;
}

const INTERNAL: ReadonlyArray<[string, string]> = [
  ['0.0.0.0/8', 'unspecified'],
  ['10.0.0.0/8', 'private'],
  ['100.64.0.0/10', 'private (shared)'],
  ['127.0.0.0/8', 'loopback'],
  ['169.254.0.0/16', 'link-local'],
  ['172.16.0.0/12', 'private'],
  ['192.168.0.0/16', 'private'],
  ['::/128', 'unspecified'],
  ['::1/128', 'loopback'],
  ['::/96', 'IPv4-compatible'],
  ['fe80::/10', 'link-local'],
  ['fec0::/10', 'site-local'],
  ['fc00::/7', 'unique-local'],
];

const INTERNAL_BLOCKS = INTERNAL.map(([cidr, kind]) => ({ block: parseBlock(cidr)!, kind }));

/** The bytes of an IPv4 or IPv6 address (without brackets or zone), or undefined. */
export function addressBytes(text: string): Bytes | undefined {
  const family = isIP(text);
  if (family === 4) return text.split('.').map(Number);
  if (family !== 6) return undefined;
  let head = text.replace(/%.*$/, '');
  const bytes: number[] = [];
  // A dotted IPv4 tail (::ffff:127.0.0.1) is two groups.
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(head);
  let tail: number[] = [];
  if (dotted !== null) {
    tail = dotted[1]!.split('.').map(Number);
    head = head.slice(0, -dotted[1]!.length);
    if (head.endsWith(':') && !head.endsWith('::')) head = head.slice(0, -1);
  }
  const groups = (part: string) => (part === '' ? [] : part.split(':'));
  const [left, right] = head.includes('::') ? head.split('::') : [head, undefined];
  const before = groups(left!);
  const after = right === undefined ? [] : groups(right);
  const missing = 8 - tail.length / 2 - before.length - after.length;
  const all = [...before, ...Array<string>(right === undefined ? 0 : missing).fill('0'), ...after];
  for (const group of all) {
    const value = Number.parseInt(group, 16);
    bytes.push(value >> 8, value & 0xff);
  }
  return [...bytes, ...tail];
}

const NAT64_PREFIX = [0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0];
const MAPPED_PREFIX = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff];

/** IPv6 that carries an IPv4 address (mapped, NAT64) as that address; others as they are. */
function unmapped(bytes: Bytes): Bytes {
  if (bytes.length !== 16) return bytes;
  for (const prefix of [MAPPED_PREFIX, NAT64_PREFIX]) {
    if (prefix.every((b, i) => bytes[i] === b)) return bytes.slice(12);
  }
  return bytes;
}

function parseBlock(text: string): Block | undefined {
  const slash = text.indexOf('/');
  const address = slash === -1 ? text : text.slice(0, slash);
  const bytes = addressBytes(address.replace(/^\[(.*)\]$/, '$1'));
  if (bytes === undefined) return undefined;
  const bits = bytes.length * 8;
  if (slash === -1) return { bytes: unmapped(bytes), prefix: unmapped(bytes).length * 8 };
  const prefixText = text.slice(slash + 1);
  if (!/^\d{1,3}$/.test(prefixText)) return undefined;
  const prefix = Number(prefixText);
  if (prefix > bits) return undefined;
  return { bytes, prefix };
}

function inBlock(bytes: Bytes, block: Block): boolean {
  if (bytes.length !== block.bytes.length) return false;
  for (let bit = 0; bit < block.prefix; bit += 8) {
    const take = Math.min(8, block.prefix - bit);
    const mask = (0xff << (8 - take)) & 0xff;
    const index = bit / 8;
    if (((bytes[index] as number) & mask) !== ((block.bytes[index] as number) & mask)) {
      return false;
    }
  }
  return true;
}

/** What kind of internal address `address` is (loopback, private, ...); undefined: public. */
export function internalKind(address: string): string | undefined {
  const bytes = addressBytes(address);
  if (bytes === undefined) return undefined;
  const plain = unmapped(bytes);
  const mapped = plain !== bytes;
  for (const { block, kind } of INTERNAL_BLOCKS) {
    if (inBlock(plain, block)) return mapped ? `${kind} (IPv4 inside IPv6)` : kind;
  }
  return undefined;
}

/** A URL's hostname as an address or a name: no brackets, lower case, no trailing dot. */
function hostOf(hostname: string): string {
  return hostname
    .replace(/^\[(.*)\]$/, '$1')
    .replace(/\.$/, '')
    .toLowerCase();
}

/** Resolves a name to all its addresses (dns.lookup's shape, for tests to stand in). */
export type Resolve = (host: string) => Promise<LookupAddress[]>;

const systemResolve: Resolve = (host) =>
  new Promise((resolve, reject) => {
    dnsLookup(host, { all: true, verbatim: true }, (err, addresses) => {
      if (err) reject(err);
      else resolve(addresses);
    });
  });

export class PushGuard {
  private readonly blocks: Block[] = [];
  private readonly hosts = new Set<string>();

  constructor(
    options: PushOptions = {},
    /** @internal Test hook: how host names are resolved (dns.lookup by default). */
    private readonly resolve: Resolve = systemResolve,
  ) {
    for (const entry of options.allow ?? []) {
      const block = parseBlock(entry);
      if (block !== undefined) this.blocks.push(block);
      else this.hosts.add(hostOf(entry));
    }
  }

  checkAddress(host: string, address: string): void {
    const kind = internalKind(address);
    if (kind === undefined) return;
    const bytes = addressBytes(address) as Bytes;
    const plain = unmapped(bytes);
    if (this.blocks.some((block) => inBlock(plain, block) || inBlock(bytes, block))) return;
    throw new PushNotAllowedError(host, hostOf(address), kind);
  }

  /** Whether a URL's host is allowed by name, so that any address of it may be reached. */
  allowsHost(hostname: string): boolean {
    return this.hosts.has(hostOf(hostname));
  }

  /** Checks a URL's host where Node will not look it up (a literal address). */
  checkLiteral(hostname: string): void {
    const host = hostOf(hostname);
    if (isIP(host) !== 0 && !this.allowsHost(host)) this.checkAddress(host, host);
  }

  /** Checks a target as it is set: a name by every address it resolves to now (if it does). */
  async checkTarget(url: string): Promise<void> {
    const { hostname } = new URL(url);
    const host = hostOf(hostname);
    if (this.allowsHost(host)) return;
    if (isIP(host) !== 0) {
      this.checkAddress(host, host);
      return;
    }
    let timer: NodeJS.Timeout | undefined;
    const slow = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), SET_LOOKUP_MS);
    });
    let addresses: LookupAddress[] | undefined;
    try {
      addresses = await Promise.race([this.resolve(host), slow]);
    } catch {
      return;
    } finally {
      clearTimeout(timer);
    }
    for (const { address } of addresses ?? []) this.checkAddress(host, address);
  }

  /** dns.lookup for the sockets of pushes, failing with PushNotAllowedError where it must. */
  readonly lookup: LookupFunction = (hostname, options, callback) => {
    const host = hostOf(hostname);
    const all = (options as LookupOptions).all === true;
    const family = (options as LookupOptions).family;
    this.resolve(host).then(
      (found) => {
        const addresses = found.filter(
          (entry) => family === undefined || family === 0 || entry.family === family,
        );
        try {
          if (!this.allowsHost(host)) {
            for (const { address } of addresses) this.checkAddress(host, address);
          }
        } catch (err) {
          callback(err as NodeJS.ErrnoException, '', 0);
          return;
        }
        if (addresses.length === 0) {
          const err: NodeJS.ErrnoException = new Error(`getaddrinfo ENOTFOUND ${host}`);
          err.code = 'ENOTFOUND';
          callback(err, '', 0);
        } else if (all) {
          (callback as unknown as (err: null, addresses: LookupAddress[]) => void)(null, addresses);
        } else {
          callback(null, addresses[0]!.address, addresses[0]!.family);
        }
      },
      (err: NodeJS.ErrnoException) => callback(err, '', 0),
    );
  };
}

export function checkPushOptions(value: unknown): PushOptions {
  if (value === undefined) return {};
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new TickwheelTypeError(
      'ERR_TICKWHEEL_INVALID_OPTION',
      `push must be an object such as { allow: ['127.0.0.0/8', 'receiver.internal'] }, got ${describe(value)}`,
    );
  }
  for (const key of Object.keys(value)) {
    if (key !== 'allow') {
      throw new TickwheelTypeError(
        'ERR_TICKWHEEL_INVALID_OPTION',
        `unknown field ${JSON.stringify(key)} of push: the field is allow`,
      );
    }
  }
  const allow = (value as PushOptions).allow ?? [];
  if (!Array.isArray(allow) || allow.length > MAX_PUSH_ALLOW) {
    throw new TickwheelTypeError(
      'ERR_TICKWHEEL_INVALID_OPTION',
      `push.allow must be an array of at most ${MAX_PUSH_ALLOW} CIDR blocks, addresses or host names, got ${describe(allow)}`,
    );
  }
  for (const entry of allow as unknown[]) checkAllowEntry(entry);
  return { allow: [...(allow as string[])] };
}

const HOST_NAME =
  /^(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*\.?$/i;

export function checkAllowEntry(entry: unknown): string {
  if (
    typeof entry !== 'string' ||
    (parseBlock(entry) === undefined && (entry.includes('/') || !HOST_NAME.test(entry)))
  ) {
    throw new TickwheelTypeError(
      'ERR_TICKWHEEL_INVALID_OPTION',
      `push.allow entries are CIDR blocks (10.1.0.0/16, fd00::/8), addresses (127.0.0.1) or host names (receiver.internal), got ${describe(entry)}`,
    );
  }
  return entry;
}
