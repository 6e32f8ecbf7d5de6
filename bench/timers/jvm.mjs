/**
 * The JVM peer: finds Java and Netty, compiles bench/jvm/NettyBench.java into bench/jvm/build/
 * (git-ignored) when the class is missing or older than the source, and runs one workload per
 * JVM. When java, javac or the Netty jar is missing, `findJvm` says what is missing and the
 * runner skips the peer.
 */

import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/* global URL */

const JVM_DIR = fileURLToPath(new URL('../jvm/', import.meta.url));
const SOURCE = join(JVM_DIR, 'NettyBench.java');
const BUILD = join(JVM_DIR, 'build');

/** Where Debian's libnetty-java puts its jars; NETTY_JAR overrides. */
const JAR_CANDIDATES = ['/usr/share/java/netty-common.jar', '/usr/share/java/netty-all.jar'];

function tool(name) {
  const home = process.env.JAVA_HOME;
  const candidates = home ? [join(home, 'bin', name)] : [];
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir !== '') candidates.push(join(dir, name));
  }
  return candidates.find((path) => existsSync(path));
}

/** { java, javac, jar } when everything is there, otherwise { missing: 'what and how to get it' }. */
export function findJvm() {
  const java = tool('java');
  const javac = tool('javac');
  const jar = [process.env.NETTY_JAR, ...JAR_CANDIDATES].find((path) => path && existsSync(path));
  const missing = [];
  if (java === undefined) missing.push('java');
  if (javac === undefined) missing.push('javac');
  if (jar === undefined) missing.push('the Netty jar (/usr/share/java/netty-common.jar)');
  if (missing.length > 0) {
    return {
      missing:
        `${missing.join(', ')} not found. Install with: apt-get install -y openjdk-17-jdk-headless ` +
        'libnetty-java (or set JAVA_HOME and NETTY_JAR); see bench/README.md.',
    };
  }
  return { java, javac, jar };
}

/**
 * Compiles the harness unless its class is newer than its source, and asks it for the Java and
 * Netty versions it runs on: { javaVersion, nettyVersion }. Throws when javac or java fails.
 */
export function compileHarness(jvm) {
  const classFile = join(BUILD, 'NettyBench.class');
  if (!existsSync(classFile) || statSync(classFile).mtimeMs < statSync(SOURCE).mtimeMs) {
    mkdirSync(BUILD, { recursive: true });
    const javac = spawnSync(jvm.javac, ['-d', BUILD, '-cp', jvm.jar, SOURCE], { encoding: 'utf8' });
    if (javac.status !== 0) throw new Error(`javac failed:\n${javac.stderr || javac.stdout}`);
  }
  const classPath = `${BUILD}${delimiter}${jvm.jar}`;
  const run = spawnSync(jvm.java, ['-cp', classPath, 'NettyBench', '--workload', 'version'], {
    encoding: 'utf8',
  });
  if (run.status !== 0) throw new Error(`java failed:\n${run.stderr || run.stdout}`);
  const { java, netty } = JSON.parse(run.stdout.trim().split('\n').pop());
  return { javaVersion: java, nettyVersion: netty };
}

/**
 * Runs one workload on the JVM. `onProgress({ step })` for each round it reports; resolves with
 * the harness's JSON result.
 */
export function runJvmCell(jvm, workload, options, onProgress) {
  const args = [
    '-cp',
    `${BUILD}${delimiter}${jvm.jar}`,
    'NettyBench',
    '--workload',
    workload,
    '--n',
    String(options.n),
    '--ops',
    String(options.ops),
    '--rounds',
    String(options.rounds),
    '--warmup',
    String(options.warmup),
    '--seed',
    String(options.seed),
    '--fixed-delay',
    String(options.fixedDelay),
    '--storm-window',
    String(options.stormWindow),
    '--steady-rate',
    String(options.steadyRate),
    '--steady-seconds',
    String(options.steadySeconds),
    '--steady-warmup',
    String(options.steadyWarmup),
  ];
  return new Promise((resolve, reject) => {
    const child = spawn(jvm.java, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk) => {
      stderr += chunk;
      for (const line of chunk.split('\n')) {
        const match = /^\{"progress":(\d+)/.exec(line);
        if (match) onProgress({ step: Number(match[1]) + 1 });
      }
    });
    child.on('error', reject);
    child.on('close', (code) => {
      const line = stdout.trim().split('\n').pop() ?? '';
      if (code !== 0 || !line.startsWith('{')) {
        const said = stderr.replace(/^\{"progress".*\n?/gm, '').trim();
        reject(new Error(`java exited with ${code}: ${said || stdout}`));
        return;
      }
      resolve(JSON.parse(line));
    });
  });
}
