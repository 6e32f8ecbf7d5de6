import io.netty.util.HashedWheelTimer;
import io.netty.util.Timeout;
import io.netty.util.TimerTask;
import java.lang.management.ManagementFactory;
import java.lang.ref.Reference;
import java.util.Arrays;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * The JVM peer of `npm run bench:timers`: Netty's io.netty.util.HashedWheelTimer with its default
 * settings (100 ms ticks, 512 slots), driven through the same workloads as the JavaScript peers,
 * on the same inputs (the same seeded mulberry32 sequences as bench/timers/sequences.mjs).
 *
 * One workload per JVM, chosen by --workload; the result is one line of JSON on stdout, shaped
 * like the JavaScript cells' results. Progress goes to stderr.
 *
 * What is timed is what the calling thread pays. Netty's newTimeout() and cancel() only append
 * to lock-free queues; the worker thread moves timeouts into their buckets (at most 100,000 per
 * tick) and unlinks cancelled ones on its own core. That is Netty's design, and it is what an
 * application thread sees.
 */
public final class NettyBench {
  private static final TimeUnit MS = TimeUnit.MILLISECONDS;
  /** Netty moves at most this many new timeouts from its queue into buckets per tick. */
  private static final int TRANSFER_PER_TICK = 100_000;
  private static final long TICK_MS = 100;

  public static void main(String[] args) throws Exception {
    Options options = Options.parse(args);
    String json =
        switch (options.workload) {
          case "schedule-cancel-random" -> scheduleCancel(options, randomDelays(options.seed, options.n));
          case "schedule-cancel-fixed" -> scheduleCancel(options, fixedDelays(options.n, options.fixedDelay));
          case "churn" -> churn(options);
          case "expiry-storm" -> storm(options);
          case "memory" -> memory(options);
          case "steady-state" -> steady(options);
          case "version" -> new Json()
              .str("java", System.getProperty("java.vm.name") + " " + System.getProperty("java.version"))
              .str("netty", String.valueOf(HashedWheelTimer.class.getPackage().getImplementationVersion()))
              .toString();
          default -> throw new IllegalArgumentException("unknown workload " + options.workload);
        };
    System.out.println(json);
    System.out.flush();
    System.exit(0);
  }

  // ---------------------------------------------------------------------------------------------
  // Workloads

  private static final TimerTask NOOP = timeout -> {};

  static String scheduleCancel(Options o, long[] delays) throws InterruptedException {
    int n = delays.length;
    HashedWheelTimer timer = new HashedWheelTimer();
    timer.start();
    Timeout[] handles = new Timeout[n];
    double[] schedule = new double[o.rounds];
    double[] cancel = new double[o.rounds];
    for (int round = 0; round < o.warmup + o.rounds; round++) {
      settle(timer);
      long t0 = System.nanoTime();
      for (int i = 0; i < n; i++) handles[i] = timer.newTimeout(NOOP, delays[i], MS);
      long t1 = System.nanoTime();
      for (int i = 0; i < n; i++) handles[i].cancel();
      long t2 = System.nanoTime();
      Arrays.fill(handles, null);
      int measured = round - o.warmup;
      if (measured >= 0) {
        schedule[measured] = (double) (t1 - t0) / n;
        cancel[measured] = (double) (t2 - t1) / n;
      }
      progress(o, round, (t2 - t0) / 1e6);
    }
    timer.stop();
    return new Json()
        .num("n", n)
        .num("scheduleNs", median(schedule))
        .num("cancelNs", median(cancel))
        .num("scheduleCancelNs", median(schedule) + median(cancel))
        .arr("scheduleSamples", schedule)
        .arr("cancelSamples", cancel)
        .toString();
  }

  static String churn(Options o) throws InterruptedException {
    int n = o.n;
    int m = o.ops;
    long[] slotDelay = randomDelays(o.seed, n);
    Mulberry32 rng = new Mulberry32(o.seed + 1);
    int[] opSlot = new int[m];
    boolean[] opRefresh = new boolean[m];
    long[] opDelay = new long[m];
    for (int k = 0; k < m; k++) {
      opSlot[k] = (int) Math.floor(rng.next() * n);
      opRefresh[k] = rng.next() < 0.5;
      opDelay[k] = randomDelay(rng);
    }
    HashedWheelTimer timer = new HashedWheelTimer();
    timer.start();
    Timeout[] handles = new Timeout[n];
    for (int i = 0; i < n; i++) handles[i] = timer.newTimeout(NOOP, slotDelay[i], MS);
    double[] op = new double[o.rounds];
    for (int round = 0; round < o.warmup + o.rounds; round++) {
      System.gc();
      long t0 = System.nanoTime();
      for (int k = 0; k < m; k++) {
        int j = opSlot[k];
        handles[j].cancel();
        // Netty has no refresh(): re-arming is cancel + newTimeout with the same delay.
        long delay = opRefresh[k] ? slotDelay[j] : (slotDelay[j] = opDelay[k]);
        handles[j] = timer.newTimeout(NOOP, delay, MS);
      }
      long t1 = System.nanoTime();
      int measured = round - o.warmup;
      if (measured >= 0) op[measured] = (double) (t1 - t0) / m;
      progress(o, round, (t1 - t0) / 1e6);
    }
    timer.stop();
    return new Json()
        .num("n", n)
        .num("ops", m)
        .num("opNs", median(op))
        .arr("opSamples", op)
        .toString();
  }

  /** A timeout of the storm: which timer it is, so the run can find its deadline. */
  static final class StormTask implements TimerTask {
    final StormPass pass;
    final int index;

    StormTask(StormPass pass, int index) {
      this.pass = pass;
      this.index = index;
    }

    @Override
    public void run(Timeout timeout) {
      pass.fired(index);
    }
  }

  /**
   * One storm: n timeouts due at `windowStart + offsets[i]`. The lateness pass lets the worker
   * run freely and records every timeout's lateness; the drain pass holds the worker busy until
   * every timeout is due and then lets go, and times how long the worker takes to drain them.
   */
  static final class StormPass {
    /** Lateness of a timeout that never ran. */
    static final long NEVER = Long.MIN_VALUE;
    final boolean lateness;
    final int n;
    final long[] deadlines;
    final long[] late;
    final CountDownLatch done = new CountDownLatch(1);
    volatile int count;
    long firstFire;
    long lastFire;
    volatile long release;
    volatile int firedBeforeRelease;

    StormPass(int n, boolean lateness) {
      this.n = n;
      this.lateness = lateness;
      this.deadlines = new long[n];
      this.late = lateness ? new long[n] : null;
      if (lateness) Arrays.fill(late, NEVER);
    }

    /** Runs on Netty's worker thread, the only thread that writes the counters. */
    void fired(int index) {
      long now = System.nanoTime();
      if (lateness) late[index] = now - deadlines[index];
      int fired = count + 1;
      count = fired;
      if (fired == 1) firstFire = now;
      if (fired == n) {
        lastFire = now;
        done.countDown();
      }
    }
  }

  static String storm(Options o) throws InterruptedException {
    int n = o.n;
    Mulberry32 rng = new Mulberry32(o.seed + 2);
    double[] offsets = new double[n];
    for (int i = 0; i < n; i++) offsets[i] = rng.next() * o.stormWindow;
    HashedWheelTimer timer = new HashedWheelTimer();
    timer.start();
    // Lead time, as in cell.mjs: twice what scheduling should take, and at least what the
    // worker needs to move every timeout into its bucket (100,000 per tick), so that the storm
    // is one of timers set beforehand; a pass that ran into the window is run again with more.
    int probe = Math.min(n, 20_000);
    Timeout[] probes = new Timeout[probe];
    double perTimerMs = 0;
    for (int r = 0; r < 2; r++) {
      long t0 = System.nanoTime();
      for (int i = 0; i < probe; i++) {
        probes[i] = timer.newTimeout(NOOP, 600_000 + (long) Math.ceil(offsets[i]), MS);
      }
      perTimerMs = (System.nanoTime() - t0) / 1e6 / probe;
      for (Timeout t : probes) t.cancel();
    }
    double leadMs =
        Math.max(
            Math.max(500, 2 * perTimerMs * n + 500),
            (double) n / TRANSFER_PER_TICK * TICK_MS + 2 * TICK_MS + 300);
    // A small warm-up storm first (a tenth of n within a tenth of the window), as in cell.mjs:
    // the expiry path is then compiled, as in a service that has been firing timers.
    int warmN = Math.max(1, (n + 9) / 10);
    Mulberry32 warmRng = new Mulberry32(o.seed + 100);
    double[] warmOffsets = new double[warmN];
    for (int i = 0; i < warmN; i++) warmOffsets[i] = warmRng.next() * o.stormWindow / 10;
    double warmLead =
        Math.max(Math.max(500, leadMs * warmN / n), (double) warmN / TRANSFER_PER_TICK * TICK_MS + 500);
    StormOutcome warm = stormPass(timer, warmOffsets, warmLead, o.stormWindow / 10, true);
    progress(o, 0, warm.elapsedMs);
    Json[] passes = new Json[2];
    for (int pass = 0; pass < 2; pass++) {
      for (int attempt = 1; ; attempt++) {
        StormOutcome outcome = stormPass(timer, offsets, leadMs, o.stormWindow, pass == 0);
        progress(o, pass + 1, outcome.elapsedMs);
        if (outcome.valid || attempt == 3) {
          passes[pass] = outcome.json.bool("valid", outcome.valid).num("attempts", attempt);
          break;
        }
        leadMs = Math.max(2 * leadMs, 1.5 * outcome.readyMs + 500);
      }
    }
    timer.stop();
    return new Json()
        .num("n", n)
        .num("windowMs", o.stormWindow)
        .num("tickMs", TICK_MS)
        .obj("warmUp", new Json().num("n", warmN).num("windowMs", o.stormWindow / 10))
        .str("drainClock", "wall time from releasing the held worker thread to the last task")
        .obj("lateness", passes[0])
        .obj("drain", passes[1])
        .toString();
  }

  record StormOutcome(Json json, boolean valid, double readyMs, double elapsedMs) {}

  static StormOutcome stormPass(
      HashedWheelTimer timer, double[] offsets, double leadMs, double windowMs, boolean lateness)
      throws InterruptedException {
    int n = offsets.length;
    StormPass run = new StormPass(n, lateness);
    settle(timer);
    long start = System.nanoTime();
    double windowStart = start + leadMs * 1e6;
    long windowEnd = (long) (windowStart + windowMs * 1e6);
    int scheduledLate = 0;
    for (int i = 0; i < n; i++) {
      long now = System.nanoTime();
      long delay = (long) Math.ceil((windowStart + offsets[i] * 1e6 - now) / 1e6);
      if (delay < 0) {
        scheduledLate++;
        delay = 0;
      }
      run.deadlines[i] = now + delay * 1_000_000L;
      timer.newTimeout(new StormTask(run, i), delay, MS);
    }
    if (!lateness) {
      // Due one and a half ticks before the window: it holds the worker until all are due.
      long holdAt = (long) ((windowStart - System.nanoTime()) / 1e6 - 1.5 * TICK_MS);
      timer.newTimeout(
          timeout -> {
            run.firedBeforeRelease = run.count;
            while (System.nanoTime() <= windowEnd + 1_000_000) Thread.onSpinWait();
            run.release = System.nanoTime();
          },
          Math.max(0, holdAt),
          MS);
    }
    System.gc();
    double readyMs = (System.nanoTime() - start) / 1e6;
    boolean complete = awaitStorm(run, windowEnd);
    Json json =
        new Json()
            .num("fired", run.count)
            .bool("complete", complete)
            .num("leadMs", leadMs)
            .num("readyMs", readyMs)
            .num("scheduledLate", scheduledLate)
            .num("firedBeforeRelease", run.firedBeforeRelease)
            .num("spanMs", complete ? (run.lastFire - run.firstFire) / 1e6 : Double.NaN);
    if (lateness) {
      long[] sorted = Arrays.stream(run.late).filter(l -> l != StormPass.NEVER).sorted().toArray();
      int early = 0;
      for (long l : sorted) if (l < 0) early++;
      json.num("early", early)
          .num("minMs", sorted.length > 0 ? sorted[0] / 1e6 : Double.NaN)
          .num("p50Ms", percentile(sorted, 0.5) / 1e6)
          .num("p90Ms", percentile(sorted, 0.9) / 1e6)
          .num("p99Ms", percentile(sorted, 0.99) / 1e6)
          .num("p999Ms", percentile(sorted, 0.999) / 1e6)
          .num("maxMs", sorted.length > 0 ? sorted[sorted.length - 1] / 1e6 : Double.NaN);
    } else if (complete) {
      double drainNs = run.lastFire - run.release;
      json.num("drainMs", drainNs / 1e6)
          .num("nsPerExpiration", drainNs / n)
          .num("perSecond", n / (drainNs / 1e9));
    }
    boolean valid =
        scheduledLate == 0 && run.firedBeforeRelease == 0 && readyMs < leadMs - TICK_MS;
    return new StormOutcome(json, valid, readyMs, (System.nanoTime() - start) / 1e6);
  }

  /** True once every timeout ran; false if none ran for 3 s after the window closed. */
  static boolean awaitStorm(StormPass run, long windowEnd) throws InterruptedException {
    int seen = -1;
    long since = System.nanoTime();
    while (!run.done.await(50, MS)) {
      long now = System.nanoTime();
      int count = run.count;
      if (count != seen) {
        seen = count;
        since = now;
      } else if (now > windowEnd && now - since > 3_000_000_000L) {
        return false;
      }
    }
    return true;
  }

  static String memory(Options o) throws InterruptedException {
    int n = o.n;
    long[] delays = randomDelays(o.seed, n);
    Timeout[] handles = new Timeout[n];
    long before = usedAfterGc();
    HashedWheelTimer timer = new HashedWheelTimer();
    timer.start();
    for (int i = 0; i < n; i++) handles[i] = timer.newTimeout(NOOP, delays[i], MS);
    // Let the worker move every timeout from its queue into the wheel before measuring.
    Thread.sleep((long) n / TRANSFER_PER_TICK * TICK_MS + 3 * TICK_MS);
    long after = usedAfterGc();
    long pending = timer.pendingTimeouts();
    Reference.reachabilityFence(handles);
    progress(o, 0, 0);
    timer.stop();
    return new Json()
        .num("n", n)
        .num("pending", pending)
        .num("bytesPerTimer", (double) (after - before) / n)
        .str("measure", "Runtime totalMemory - freeMemory after System.gc()")
        .toString();
  }

  /** A self-re-arming timeout of the steady-state workload. */
  static final class SteadyTask implements TimerTask {
    final SteadyRun run;
    final int index;

    SteadyTask(SteadyRun run, int index) {
      this.run = run;
      this.index = index;
    }

    @Override
    public void run(Timeout timeout) {
      run.fired(this);
    }
  }

  static final class SteadyRun {
    final HashedWheelTimer timer;
    final long[] periods;
    final long[] deadlines;
    final long[] late;
    volatile boolean measuring;
    int count;
    int overflow;

    SteadyRun(HashedWheelTimer timer, long[] periods, int capacity) {
      this.timer = timer;
      this.periods = periods;
      this.deadlines = new long[periods.length];
      this.late = new long[capacity];
    }

    void fired(SteadyTask task) {
      long now = System.nanoTime();
      int i = task.index;
      if (measuring) {
        if (count < late.length) late[count++] = now - deadlines[i];
        else overflow++;
      }
      deadlines[i] = now + periods[i] * 1_000_000L;
      timer.newTimeout(task, periods[i], MS);
    }
  }

  static String steady(Options o) throws InterruptedException {
    SteadyTimers timers = steadyTimers(o.seed + 3, o.steadyRate);
    long[] periods = timers.periods;
    long[] phases = timers.phases;
    int k = periods.length;
    HashedWheelTimer timer = new HashedWheelTimer();
    timer.start();
    int capacity = (int) Math.ceil(o.steadyRate * o.steadySeconds * 1.5) + 1000;
    SteadyRun run = new SteadyRun(timer, periods, capacity);
    for (int i = 0; i < k; i++) {
      long now = System.nanoTime();
      run.deadlines[i] = now + phases[i] * 1_000_000L;
      timer.newTimeout(new SteadyTask(run, i), phases[i], MS);
    }
    Thread.sleep((long) (o.steadyWarmup * 1000));
    com.sun.management.OperatingSystemMXBean os =
        (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
    long cpu0 = os.getProcessCpuTime();
    long wall0 = System.nanoTime();
    run.measuring = true;
    Thread.sleep((long) (o.steadySeconds * 1000));
    run.measuring = false;
    long wall1 = System.nanoTime();
    long cpu1 = os.getProcessCpuTime();
    timer.stop(); // joins the worker: its writes are visible from here on
    progress(o, 0, (wall1 - wall0) / 1e6);
    long[] sorted = Arrays.copyOf(run.late, run.count);
    Arrays.sort(sorted);
    int early = 0;
    for (long l : sorted) if (l < 0) early++;
    double seconds = (wall1 - wall0) / 1e9;
    int fired = run.count + run.overflow;
    return new Json()
        .num("timers", k)
        .num("targetRate", o.steadyRate)
        .num("seconds", seconds)
        .num("fired", fired)
        .num("rate", fired / seconds)
        .num("tickMs", TICK_MS)
        .num("early", early)
        .num("minMs", sorted.length > 0 ? sorted[0] / 1e6 : 0)
        .num("p50Ms", percentile(sorted, 0.5) / 1e6)
        .num("p90Ms", percentile(sorted, 0.9) / 1e6)
        .num("p99Ms", percentile(sorted, 0.99) / 1e6)
        .num("p999Ms", percentile(sorted, 0.999) / 1e6)
        .num("maxMs", sorted.length > 0 ? sorted[sorted.length - 1] / 1e6 : 0)
        .num("cpuPercent", 100.0 * (cpu1 - cpu0) / (wall1 - wall0))
        .num("cpuNsPerExpiration", fired > 0 ? (double) (cpu1 - cpu0) / fired : 0)
        .str("cpuClock", "process CPU time, all threads")
        .toString();
  }

  // ---------------------------------------------------------------------------------------------
  // Inputs: the same sequences as bench/timers/sequences.mjs

  /** mulberry32, bit for bit as in sequences.mjs, so both runtimes see the same inputs. */
  static final class Mulberry32 {
    private int state;

    Mulberry32(long seed) {
      state = (int) seed;
    }

    double next() {
      state += 0x6D2B79F5;
      int a = state;
      int t = (a ^ (a >>> 15)) * (1 | a);
      t = (t + ((t ^ (t >>> 7)) * (61 | t))) ^ t;
      return ((t ^ (t >>> 14)) & 0xFFFFFFFFL) / 4294967296.0;
    }
  }

  static long randomDelay(Mulberry32 rng) {
    return 1000 + (long) Math.floor(rng.next() * 599_001);
  }

  static long[] randomDelays(long seed, int n) {
    Mulberry32 rng = new Mulberry32(seed);
    long[] delays = new long[n];
    for (int i = 0; i < n; i++) delays[i] = randomDelay(rng);
    return delays;
  }

  record SteadyTimers(long[] periods, long[] phases) {}

  /**
   * Periods of 500 to 1500 ms and a first delay (phase) within the period, for as many timers as
   * it takes for their rates (1000 / period per second) to add up to `rate`.
   */
  static SteadyTimers steadyTimers(long seed, double rate) {
    Mulberry32 rng = new Mulberry32(seed);
    long[] periods = new long[16];
    long[] phases = new long[16];
    int k = 0;
    for (double sum = 0; sum < rate; k++) {
      if (k == periods.length) {
        periods = Arrays.copyOf(periods, k * 2);
        phases = Arrays.copyOf(phases, k * 2);
      }
      periods[k] = 500 + (long) Math.floor(rng.next() * 1001);
      phases[k] = (long) Math.floor(rng.next() * periods[k]);
      sum += 1000.0 / periods[k];
    }
    return new SteadyTimers(Arrays.copyOf(periods, k), Arrays.copyOf(phases, k));
  }

  static long[] fixedDelays(int n, long delay) {
    long[] delays = new long[n];
    Arrays.fill(delays, delay);
    return delays;
  }

  // ---------------------------------------------------------------------------------------------
  // Measurement

  /** Waits for the worker to empty the wheel of what the last round cancelled, then collects. */
  static void settle(HashedWheelTimer timer) throws InterruptedException {
    long giveUp = System.nanoTime() + 30_000_000_000L;
    while (timer.pendingTimeouts() > 0 && System.nanoTime() < giveUp) Thread.sleep(10);
    System.gc();
  }

  static long usedAfterGc() throws InterruptedException {
    Runtime runtime = Runtime.getRuntime();
    for (int i = 0; i < 3; i++) {
      System.gc();
      Thread.sleep(50);
    }
    return runtime.totalMemory() - runtime.freeMemory();
  }

  static double median(double[] samples) {
    if (samples.length == 0) return 0;
    double[] sorted = samples.clone();
    Arrays.sort(sorted);
    int mid = sorted.length / 2;
    return sorted.length % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  }

  /** Nearest rank, as in stats.mjs. */
  static double percentile(long[] sorted, double p) {
    if (sorted.length == 0) return 0;
    int rank = (int) Math.ceil(p * sorted.length);
    return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
  }

  static void progress(Options o, int round, double ms) {
    System.err.printf(Locale.ROOT, "{\"progress\":%d,\"ms\":%.1f}%n", round, ms);
  }

  // ---------------------------------------------------------------------------------------------
  // Plumbing

  static final class Options {
    String workload = "";
    int n = 1_000_000;
    int ops = 1_000_000;
    int rounds = 3;
    int warmup = 2;
    long seed = 42;
    long fixedDelay = 30_000;
    double stormWindow = 1000;
    double steadyRate = 100_000;
    double steadySeconds = 10;
    double steadyWarmup = 2;

    static Options parse(String[] args) {
      Options o = new Options();
      for (int i = 0; i + 1 < args.length; i += 2) {
        String value = args[i + 1];
        switch (args[i]) {
          case "--workload" -> o.workload = value;
          case "--n" -> o.n = Integer.parseInt(value);
          case "--ops" -> o.ops = Integer.parseInt(value);
          case "--rounds" -> o.rounds = Integer.parseInt(value);
          case "--warmup" -> o.warmup = Integer.parseInt(value);
          case "--seed" -> o.seed = Long.parseLong(value);
          case "--fixed-delay" -> o.fixedDelay = Long.parseLong(value);
          case "--storm-window" -> o.stormWindow = Double.parseDouble(value);
          case "--steady-rate" -> o.steadyRate = Double.parseDouble(value);
          case "--steady-seconds" -> o.steadySeconds = Double.parseDouble(value);
          case "--steady-warmup" -> o.steadyWarmup = Double.parseDouble(value);
          default -> throw new IllegalArgumentException("unknown option " + args[i]);
        }
      }
      return o;
    }
  }

  /** Just enough JSON for flat results: numbers, strings, booleans, arrays and nested objects. */
  static final class Json {
    private final StringBuilder out = new StringBuilder("{");

    private Json key(String name) {
      if (out.length() > 1) out.append(',');
      out.append('"').append(name).append("\":");
      return this;
    }

    Json num(String name, double value) {
      key(name);
      out.append(Double.isFinite(value) ? formatNumber(value) : "null");
      return this;
    }

    Json str(String name, String value) {
      key(name).out.append('"').append(value.replace("\\", "\\\\").replace("\"", "\\\"")).append('"');
      return this;
    }

    Json bool(String name, boolean value) {
      key(name).out.append(value);
      return this;
    }

    Json arr(String name, double[] values) {
      key(name).out.append('[');
      for (int i = 0; i < values.length; i++) {
        if (i > 0) out.append(',');
        out.append(formatNumber(values[i]));
      }
      out.append(']');
      return this;
    }

    Json obj(String name, Json value) {
      key(name).out.append(value == null ? "null" : value.toString());
      return this;
    }

    private static String formatNumber(double value) {
      if (value == Math.rint(value) && Math.abs(value) < 1e15) return Long.toString((long) value);
      return String.format(Locale.ROOT, "%.4f", value);
    }

    @Override
    public String toString() {
      return out + "}";
    }
  }
}
