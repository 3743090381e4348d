package io.switchman.peers;

import org.apache.dubbo.common.Version;
import org.apache.dubbo.config.ApplicationConfig;
import org.apache.dubbo.config.ReferenceConfig;
import org.apache.dubbo.config.bootstrap.DubboBootstrap;
import org.apache.dubbo.rpc.RpcContext;

import java.io.IOException;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * Closed-loop load of one typed {@link DemoService} method through Dubbo's own
 * {@code ReferenceConfig} (one shared connection, Dubbo's default) to a provider at a direct
 * URL: for each in-flight level, a warm-up phase, then a timed phase; one JSON line per level
 * with calls per second and latency percentiles in microseconds.
 *
 * <p>Modes: {@code async} keeps N calls in flight with N chains of asynchronous calls (a
 * reference with {@code async=true}; each call's {@code CompletableFuture} from
 * {@code RpcContext.getServiceContext().getCompletableFuture()}, whose completion starts the
 * chain's next call on Dubbo's callback thread); {@code sync} runs N threads each making
 * blocking calls. ({@code RpcContext.asyncCall} is no use here: for a method returning a
 * primitive it returns an already completed future of the proxy's default value, 0.)
 */
final class Bench {
    /** Latencies are counted in 1 µs buckets up to 1 s; slower calls land in the last one. */
    private static final int BUCKETS = 1_000_001;

    private Bench() {}

    static int run(Args a) throws Exception {
        LoopbackConfiguratorFactory.pinLocalHost();
        PrintStream out = Main.STDOUT;
        String url = a.require("url");
        String method = a.get("method", "add");
        if (!method.equals("add") && !method.equals("sayHello")) {
            throw new IllegalArgumentException("--method must be add or sayHello, got " + method);
        }
        String mode = a.get("mode", "async");
        if (!mode.equals("async") && !mode.equals("sync")) {
            throw new IllegalArgumentException("--mode must be async or sync, got " + mode);
        }
        List<Integer> levels = new ArrayList<>();
        for (String s : a.get("in-flight", "16,128").split(",")) {
            if (!s.trim().isEmpty()) {
                int n = Integer.parseInt(s.trim());
                if (n < 1) {
                    throw new IllegalArgumentException("--in-flight levels must be >= 1");
                }
                levels.add(n);
            }
        }
        long jvmWarmupMs = a.getInt("jvm-warmup-ms", 0);
        long warmupMs = a.getInt("warmup-ms", 2000);
        long measureMs = a.getInt("measure-ms", 5000);
        long maxCalls = Long.parseLong(a.get("max-calls", "5000000"));
        int timeoutMs = a.getInt("timeout-ms", 5000);
        String cpuOf = a.get("cpu-of", null);

        ApplicationConfig app = new ApplicationConfig(a.get("application", "switchman-java-bench"));
        app.setQosEnable(false);
        app.setEnableFileCache(false);
        app.setShutwait("0");

        ReferenceConfig<DemoService> ref = new ReferenceConfig<>();
        ref.setInterface(DemoService.class);
        ref.setUrl(url);
        ref.setTimeout(timeoutMs);
        ref.setAsync(mode.equals("async"));

        DubboBootstrap bootstrap = DubboBootstrap.getInstance().application(app).reference(ref);
        boolean allOk = true;
        try {
            bootstrap.start();
            DemoService svc = ref.get();
            Call call = method.equals("add")
                    ? new Call(() -> svc.add(1, 2), 3)
                    : new Call(() -> svc.sayHello("x"), null);
            Object first = call.start(mode.equals("async")).get(timeoutMs, TimeUnit.MILLISECONDS);
            if (!call.good(first)) {
                throw new IllegalStateException(method + " returned " + first);
            }
            if (jvmWarmupMs > 0) {
                // The JIT compiles Dubbo's call path over many seconds: run it in first.
                Level warm = new Level(levels.stream().max(Integer::compare).orElse(16),
                        jvmWarmupMs, 0, Long.MAX_VALUE, call, null);
                warm.run(mode);
                allOk &= warm.errors.get() == 0;
            }
            for (int n : levels) {
                Level level = new Level(n, warmupMs, measureMs, maxCalls, call, cpuOf);
                level.run(mode);
                allOk &= level.errors.get() == 0;
                out.println(level.json(mode, method));
                out.flush();
            }
        } catch (Throwable t) {
            out.println("{\"ok\":false,\"error\":" + Json.write(Consumer.describe(t)) + "}");
            out.flush();
            allOk = false;
        }
        try {
            bootstrap.destroy();
        } catch (Throwable t) {
            System.err.println("[java-peer] bench shutdown: " + t);
        }
        return allOk ? 0 : 1;
    }

    private static void joinUninterruptibly(Thread t) {
        while (t.isAlive()) {
            try {
                t.join();
            } catch (InterruptedException e) {
                // Keep waiting: the thread ends by itself.
            }
        }
    }

    /** CPU time of this JVM, all threads (JIT and GC included). */
    static long processCpuNanos() {
        java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        if (os instanceof com.sun.management.OperatingSystemMXBean) {
            return ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime();
        }
        return 0;
    }

    /**
     * CPU time of process {@code pid} from {@code /proc/<pid>/stat} (utime + stime, in Linux's
     * 100 Hz clock ticks); -1 when there is no such file or no pid.
     */
    static long peerCpuNanos(String pid) {
        if (pid == null) {
            return -1;
        }
        try {
            String stat = new String(Files.readAllBytes(Paths.get("/proc", pid, "stat")), StandardCharsets.US_ASCII);
            String[] f = stat.substring(stat.lastIndexOf(')') + 2).trim().split("\\s+");
            return (Long.parseLong(f[11]) + Long.parseLong(f[12])) * 10_000_000L;
        } catch (IOException | RuntimeException e) {
            return -1;
        }
    }

    /**
     * Busy time of all cores from {@code /proc/stat} (user, nice, system, irq, softirq, steal;
     * 100 Hz ticks); -1 when unreadable.
     */
    static long machineBusyNanos() {
        try {
            for (String line : Files.readAllLines(Paths.get("/proc/stat"), StandardCharsets.US_ASCII)) {
                if (line.startsWith("cpu ")) {
                    String[] f = line.substring(4).trim().split("\\s+");
                    long ticks = 0;
                    for (int i : new int[] {0, 1, 2, 5, 6, 7}) {
                        ticks += Long.parseLong(f[i]);
                    }
                    return ticks * 10_000_000L;
                }
            }
        } catch (IOException | RuntimeException e) {
            // Not Linux.
        }
        return -1;
    }

    /** A checked call of the benchmarked method. */
    private static final class Call {
        final Callable<Object> invoke;
        final Object expected;

        Call(Callable<Object> invoke, Object expected) {
            this.invoke = invoke;
            this.expected = expected;
        }

        /** One call: with an async reference, the future Dubbo left in the context. */
        CompletableFuture<Object> start(boolean async) {
            try {
                Object r = invoke.call();
                return async
                        ? RpcContext.getServiceContext().getCompletableFuture()
                        : CompletableFuture.completedFuture(r);
            } catch (Throwable t) {
                return CompletableFuture.failedFuture(t);
            }
        }

        boolean good(Object result) {
            if (expected != null) {
                return expected.equals(result);
            }
            return result instanceof String && ((String) result).startsWith("hello, x");
        }
    }

    /** One in-flight level: N loops, a warm-up, then the timed phase. */
    private static final class Level {
        final int inFlight;
        final long warmupMs;
        final long measureMs;
        final long maxCalls;
        final Call call;
        final String cpuOf;
        final AtomicLongArray histogram = new AtomicLongArray(BUCKETS);
        final AtomicLong started = new AtomicLong();
        final AtomicLong errors = new AtomicLong();
        final AtomicLong maxNanos = new AtomicLong();
        volatile String firstError;
        long measureStart;
        long end;
        long finished;
        /**
         * CPU time of this JVM, of the process {@code --cpu-of} and of the whole machine (busy
         * time of all cores) in the timed phase.
         */
        long cpuNanos;
        long peerCpuNanos = -1;
        long machineBusyNanos = -1;

        Level(int inFlight, long warmupMs, long measureMs, long maxCalls, Call call, String cpuOf) {
            this.inFlight = inFlight;
            this.warmupMs = warmupMs;
            this.measureMs = measureMs;
            this.maxCalls = maxCalls;
            this.call = call;
            this.cpuOf = cpuOf;
        }

        void run(String mode) throws InterruptedException {
            start();
            Runnable join = mode.equals("async") ? runAsync() : runSync();
            long wait = measureStart - System.nanoTime();
            if (wait > 0) {
                TimeUnit.NANOSECONDS.sleep(wait);
            }
            long cpu0 = processCpuNanos();
            long peer0 = peerCpuNanos(cpuOf);
            long busy0 = machineBusyNanos();
            join.run();
            finished = System.nanoTime();
            cpuNanos = processCpuNanos() - cpu0;
            long peer1 = peerCpuNanos(cpuOf);
            peerCpuNanos = peer0 < 0 || peer1 < 0 ? -1 : peer1 - peer0;
            long busy1 = machineBusyNanos();
            machineBusyNanos = busy0 < 0 || busy1 < 0 ? -1 : busy1 - busy0;
        }

        /** Whether a loop may start another call (time left, count not reached, no error). */
        boolean more(long now) {
            return now < end && errors.get() == 0 && started.incrementAndGet() <= maxCalls;
        }

        void done(long t0, Object result, Throwable error) {
            long t1 = System.nanoTime();
            if (error != null || !call.good(result)) {
                if (errors.incrementAndGet() == 1) {
                    firstError = error != null ? Consumer.describe(error) : "unexpected result " + result;
                }
                return;
            }
            if (t0 >= measureStart) {
                long ns = t1 - t0;
                histogram.incrementAndGet((int) Math.min(ns / 1000, BUCKETS - 1));
                maxNanos.accumulateAndGet(ns, Math::max);
            }
        }

        void start() {
            long now = System.nanoTime();
            measureStart = now + TimeUnit.MILLISECONDS.toNanos(warmupMs);
            end = measureStart + TimeUnit.MILLISECONDS.toNanos(measureMs);
        }

        /** Starts the threads; the returned action waits for them. */
        Runnable runSync() {
            Thread[] threads = new Thread[inFlight];
            for (int i = 0; i < inFlight; i++) {
                threads[i] = new Thread(() -> {
                    long t0;
                    while (more(t0 = System.nanoTime())) {
                        Object r = null;
                        Throwable e = null;
                        try {
                            r = call.invoke.call();
                        } catch (Throwable t) {
                            e = t;
                        }
                        done(t0, r, e);
                    }
                }, "bench-" + i);
                threads[i].start();
            }
            return () -> {
                for (Thread t : threads) {
                    joinUninterruptibly(t);
                }
            };
        }

        /** Starts the chains; the returned action waits for them. */
        Runnable runAsync() {
            CountDownLatch latch = new CountDownLatch(inFlight);
            for (int i = 0; i < inFlight; i++) {
                new Chain(latch).next();
            }
            return () -> {
                boolean done = false;
                while (!done) {
                    try {
                        latch.await();
                        done = true;
                    } catch (InterruptedException e) {
                        // Keep waiting: the chains end by themselves.
                    }
                }
            };
        }

        /** One of the N call chains of the async mode. */
        private final class Chain {
            final CountDownLatch latch;

            Chain(CountDownLatch latch) {
                this.latch = latch;
            }

            void next() {
                // A call already complete when it returns is handled here, in a loop, so a
                // run of such calls does not grow the stack.
                while (true) {
                    long t0 = System.nanoTime();
                    if (!more(t0)) {
                        latch.countDown();
                        return;
                    }
                    CompletableFuture<Object> f = call.start(true);
                    if (f.isDone()) {
                        Object r = null;
                        Throwable e = null;
                        try {
                            r = f.join();
                        } catch (Throwable t) {
                            e = t;
                        }
                        done(t0, r, e);
                        continue;
                    }
                    f.whenComplete((r, e) -> {
                        done(t0, r, e);
                        next();
                    });
                    return;
                }
            }
        }

        /** The smallest latency (µs) that at least {@code p} of the measured calls did not exceed. */
        long percentile(long total, double p) {
            long rank = Math.max(1, (long) Math.ceil(p * total));
            long seen = 0;
            for (int i = 0; i < BUCKETS; i++) {
                seen += histogram.get(i);
                if (seen >= rank) {
                    return i;
                }
            }
            return BUCKETS - 1;
        }

        String json(String mode, String method) {
            long calls = 0;
            for (int i = 0; i < BUCKETS; i++) {
                calls += histogram.get(i);
            }
            double seconds = (finished - measureStart) / 1e9;
            StringBuilder s = new StringBuilder("{");
            s.append("\"ok\":").append(errors.get() == 0);
            s.append(",\"program\":\"bench\",\"mode\":").append(Json.write(mode));
            s.append(",\"method\":").append(Json.write(method));
            s.append(",\"in_flight\":").append(inFlight);
            s.append(",\"warmup_ms\":").append(warmupMs);
            s.append(",\"measure_ms\":").append(measureMs);
            s.append(",\"calls\":").append(calls);
            s.append(",\"errors\":").append(errors.get());
            s.append(",\"seconds\":").append(String.format(java.util.Locale.ROOT, "%.3f", seconds));
            s.append(",\"calls_per_s\":").append(String.format(java.util.Locale.ROOT, "%.1f", calls / seconds));
            s.append(",\"p50_us\":").append(percentile(calls, 0.50));
            s.append(",\"p99_us\":").append(percentile(calls, 0.99));
            s.append(",\"max_us\":").append(maxNanos.get() / 1000);
            s.append(",\"cpu_ms\":").append(cpuNanos / 1_000_000);
            if (peerCpuNanos >= 0) {
                s.append(",\"peer_cpu_ms\":").append(peerCpuNanos / 1_000_000);
            }
            if (machineBusyNanos >= 0) {
                s.append(",\"machine_busy_ms\":").append(machineBusyNanos / 1_000_000);
            }
            s.append(",\"dubbo_version\":").append(Json.write(Objects.toString(Version.getVersion())));
            s.append(",\"java_version\":").append(Json.write(System.getProperty("java.version")));
            if (firstError != null) {
                s.append(",\"error\":").append(Json.write(firstError));
            }
            return s.append("}").toString();
        }
    }
}
