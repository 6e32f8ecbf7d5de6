/**
 * Which addresses a push may reach (docs/push.md, Security): a target whose host is, or
 * resolves to, an INTERNAL address is refused unless the operator allows it. Checked when a
 * target is set, and again at every connection (DNS rebinding): the sockets' `lookup`, and
 * literal IP hosts (no lookup) before each request.
 */

import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { TickwheelError } from '../errors.js';
import { describe, invalidOption } from '../validate.js';
import { fieldsOf } from './message.js';

export interface PushOptions {
  /**
   * Internal addresses pushes may reach: CIDR blocks (`10.1.0.0/16`), addresses (`127.0.0.1`),
   * or host names matched exactly (`receiver.internal`). At most 1,000 entries. Default none.
   */
  allow?: readonly string[];
  /**
   * Connections to push targets open at once, over all topics (each takes a file descriptor);
   * a request past it waits for one, within its target's `timeoutMs`. Default 256.
   */
  maxConnections?: number;
}

export const DEFAULT_PUSH_CONNECTIONS = 256;

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

/** Adds a CIDR block or an address to `list`; false if it is neither. */
function addBlock(list: BlockList, text: string): boolean {
  const slash = text.indexOf('/');
  const address = (slash === -1 ? text : text.slice(0, slash)).replace(/^\[(.*)\]$/, '$1');
  const family = isIP(address);
  if (family === 0) return false;
  const type = family === 4 ? 'ipv4' : 'ipv6';
  if (slash === -1) {
    const inner = carried(address);
    if (inner === undefined) list.addAddress(address, type);
    else list.addAddress(inner, 'ipv4');
    return true;
  }
  const prefix = text.slice(slash + 1);
  if (!/^\d{1,3}$/.test(prefix) || Number(prefix) > (family === 4 ? 32 : 128)) return false;
  list.addSubnet(address, Number(prefix), type);
  return true;
}

function blockList(entries: readonly string[]): BlockList {
  const list = new BlockList();
  for (const entry of entries) addBlock(list, entry);
  return list;
}

const INTERNAL_BLOCKS = INTERNAL.map(([cidr, kind]) => ({ list: blockList([cidr]), kind }));
/** IPv6 blocks that carry an IPv4 address in their last 32 bits: mapped, and NAT64. */
const CARRIERS = blockList(['::ffff:0:0/96', '64:ff9b::/96']);

/** The IPv4 address an IPv6 one carries (mapped, NAT64), or undefined. */
function carried(address: string): string | undefined {
  if (isIP(address) !== 6 || !CARRIERS.check(address, 'ipv6')) return undefined;
  // The URL parser writes IPv6 in its canonical form: the last two groups are the IPv4 address.
  const groups = new URL(`http://[${address}]/`).hostname.slice(1, -1).split(':');
  const high = Number.parseInt(groups.at(-2) || '0', 16);
  const low = Number.parseInt(groups.at(-1) || '0', 16);
  return [high >> 8, high & 0xff, low >> 8, low & 0xff].join('.');
}

/** An address without its zone, and its IPv4 form if it carries one; undefined: not an IP. */
function parsed(
  address: string,
): { plain: string; type: 'ipv4' | 'ipv6'; inner?: string } | undefined {
  const plain = address.replace(/%.*$/, '');
  const family = isIP(plain);
  if (family === 0) return undefined;
  return { plain, type: family === 4 ? 'ipv4' : 'ipv6', inner: carried(plain) };
}

/** What kind of internal address `address` is (loopback, private, ...); undefined: public. */
export function internalKind(address: string): string | undefined {
  const ip = parsed(address);
  if (ip === undefined) return undefined;
  for (const { list, kind } of INTERNAL_BLOCKS) {
    if (ip.inner !== undefined) {
      if (list.check(ip.inner, 'ipv4')) return `${kind} (IPv4 inside IPv6)`;
    } else if (list.check(ip.plain, ip.type)) return kind;
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
  private readonly allowed = new BlockList();
  private readonly hosts = new Set<string>();

  constructor(
    options: PushOptions = {},
    /** @internal Test hook: how host names are resolved (dns.lookup by default). */
    private readonly resolve: Resolve = systemResolve,
  ) {
    for (const entry of options.allow ?? []) {
      if (!addBlock(this.allowed, entry)) this.hosts.add(hostOf(entry));
    }
  }

  checkAddress(host: string, address: string): void {
    const kind = internalKind(address);
    if (kind === undefined) return;
    const ip = parsed(address)!;
    if (this.allowed.check(ip.plain, ip.type)) return;
    if (ip.inner !== undefined && this.allowed.check(ip.inner, 'ipv4')) return;
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
  const example = "{ allow: ['127.0.0.0/8', 'receiver.internal'], maxConnections: 256 }";
  const fields = fieldsOf(value, ['allow', 'maxConnections'], 'push', example);
  const allow = fields.allow ?? [];
  const maxConnections = fields.maxConnections;
  if (!Array.isArray(allow) || allow.length > MAX_PUSH_ALLOW) {
    throw invalidOption(
      `push.allow must be an array of at most ${MAX_PUSH_ALLOW} CIDR blocks, addresses or host names, got ${describe(allow)}`,
    );
  }
  for (const entry of allow as unknown[]) checkAllowEntry(entry);
  if (maxConnections === undefined) return { allow: [...(allow as string[])] };
  if (!Number.isInteger(maxConnections) || (maxConnections as number) < 1) {
    throw invalidOption(
      `push.maxConnections must be a whole number of connections, at least 1, got ${describe(maxConnections)}`,
    );
  }
  return { allow: [...(allow as string[])], maxConnections: maxConnections as number };
}

const HOST_NAME =
  /^(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*\.?$/i;

export function checkAllowEntry(entry: unknown): string {
  if (
    typeof entry !== 'string' ||
    (!addBlock(new BlockList(), entry) && (entry.includes('/') || !HOST_NAME.test(entry)))
  ) {
    throw invalidOption(
      `push.allow entries are CIDR blocks (10.1.0.0/16, fd00::/8), addresses (127.0.0.1) or host names (receiver.internal), got ${describe(entry)}`,
    );
  }
  return entry;
}
