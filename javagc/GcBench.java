// GcBench is the Java side of costlab's gc lab: the same workload shape as gcbench's heap
// mode (a live set of vnode-like linked objects, then stat-like calls that each allocate a
// request, a 512-byte path buffer and a reply) so that the GC's CPU share can be compared
// across collectors at the same headroom. costlab starts one fresh JVM per point with
// -Xms = -Xmx = live x (1 + headroom) and the collector under test. JDK only.
//
// GC CPU share = CPU time of the JVM's own GC threads (read per thread from
// /proc/self/task/*/stat, picked by the native thread names HotSpot gives them) over the
// process's CPU time (/proc/self/stat), from the end of a System.gc() before the work to
// the end of the work. The GC MXBeans' counts and (pause or cycle) times are printed beside.
//
// Prints one JSON object on stdout.

import java.io.IOException;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryUsage;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

public final class GcBench {
    static final int FANOUT = 4;
    static final int NAME_LEN = 12;
    static final int PATH_BUF = 512;
    static final int PATH_DEPTH = 3;
    static final int HOT_SET = 1 << 15;
    /** What one call allocates in gcbench (Request 64 B, path buffer, Stat 80 B). */
    static final long REQUEST_BYTES = 64 + PATH_BUF + 80;

    static final class Vnode {
        long ino, size;
        int mode, nlink;
        long mtime, ctime;
        Vnode parent, next, peer;
        Vnode k0, k1, k2, k3;
        String name;
        long[] blocks = new long[20];
    }

    static final class Request {
        int op;
        long ino;
        int flags;
        byte[] path;
        int pathLen;
        Vnode dir;
        Stat reply;
    }

    static final class Stat {
        long ino, size;
        int mode, nlink;
        long mtime, ctime;
        long[] blks = new long[4];
    }

    static final class Heap {
        Vnode root;
        Vnode[] buckets;
        int n;

        Vnode lookup(long ino) {
            for (Vnode v = buckets[(int) (hashIno(ino) & (buckets.length - 1))]; v != null; v = v.next) {
                if (v.ino == ino) return v;
            }
            return null;
        }
    }

    static long hashIno(long ino) {
        ino ^= ino >>> 33;
        ino *= 0xff51afd7ed558ccdL;
        ino ^= ino >>> 33;
        return ino;
    }

    /** xorshift, as gcbench's. */
    static final class Rng {
        long s;
        Rng(long seed) { s = seed * 0x9e3779b97f4a7c15L + 1; }
        long next() {
            s ^= s << 13;
            s ^= s >>> 7;
            s ^= s << 17;
            return s;
        }
    }

    static int bucketCount(int n) {
        int b = 1;
        while (b * 3 / 2 < n) b *= 2;
        return b;
    }

    static String makeName(int i) {
        char[] c = new char[NAME_LEN];
        java.util.Arrays.fill(c, '0');
        c[0] = 'f';
        String s = Integer.toString(i);
        s.getChars(0, s.length(), c, NAME_LEN - s.length());
        return new String(c);
    }

    static Heap buildHeap(int n) {
        if (n < 1) n = 1;
        Vnode[] nodes = new Vnode[n];
        Heap h = new Heap();
        h.buckets = new Vnode[bucketCount(n)];
        Rng r = new Rng(1);
        for (int i = 0; i < n; i++) {
            Vnode v = new Vnode();
            v.ino = i + 1;
            v.size = Long.remainderUnsigned(r.next(), 65536);
            v.mode = 0100644;
            v.nlink = 1;
            v.name = makeName(i);
            for (int b = 0; b < 20; b++) v.blocks[b] = (long) i * 32 + b;
            if (i > 0) {
                Vnode p = nodes[(i - 1) / FANOUT];
                v.parent = p;
                switch ((i - 1) % FANOUT) {
                    case 0: p.k0 = v; break;
                    case 1: p.k1 = v; break;
                    case 2: p.k2 = v; break;
                    default: p.k3 = v; break;
                }
                p.mode = 040755;
            }
            int slot = (int) (hashIno(v.ino) & (h.buckets.length - 1));
            v.next = h.buckets[slot];
            h.buckets[slot] = v;
            nodes[i] = v;
        }
        for (int i = 0; i < n; i++) {
            nodes[i].peer = nodes[(int) Long.remainderUnsigned(r.next(), n)];
        }
        h.root = nodes[0];
        h.n = n;
        return h;
    }

    static long statCall(Heap h, Rng r, Request[] inflight, int slot) {
        long x = r.next();
        long span = h.n;
        if ((x & 7) != 0 && span > HOT_SET) span = HOT_SET;
        long ino = Long.remainderUnsigned(x >>> 3, span) + 1;
        Request req = new Request();
        req.op = 4;
        req.ino = ino;
        req.flags = (int) ino;
        req.path = new byte[PATH_BUF];
        Vnode v = h.lookup(ino);
        req.dir = v;
        for (int d = 0; d < PATH_DEPTH && v != null; d++) {
            req.path[req.pathLen++] = '/';
            String nm = v.name;
            for (int k = 0; k < nm.length(); k++) req.path[req.pathLen++] = (byte) nm.charAt(k);
            v = v.parent;
        }
        Vnode t = req.dir;
        if (t == null) return 0;
        Stat st = new Stat();
        st.ino = t.ino;
        st.size = t.size;
        st.mode = t.mode;
        st.nlink = t.nlink;
        st.mtime = t.mtime;
        st.ctime = t.ctime;
        System.arraycopy(t.blocks, 0, st.blks, 0, 4);
        req.reply = st;
        inflight[slot & (inflight.length - 1)] = req;
        long sum = 0;
        for (int k = 0; k < req.pathLen; k++) sum = sum * 31 + req.path[k];
        return sum ^ req.reply.ino ^ req.dir.nlink;
    }

    // ---- accounting ----------------------------------------------------------------------

    /** Ticks per second of /proc's CPU times (USER_HZ); 100 on every Linux costlab runs on. */
    static final double CLK_TCK = 100.0;

    /** Whether a native thread name (/proc comm, at most 15 bytes) is one of the JVM's GC threads. */
    static boolean isGcThread(String comm) {
        return comm.startsWith("GC Thread")
            || comm.startsWith("G1 ")
            || comm.startsWith("Z")
            || comm.startsWith("Shenandoah")
            || comm.startsWith("RuntimeWorker")
            || comm.startsWith("VM Thread");
    }

    /** utime + stime (ticks) from a /proc stat line: fields 14 and 15, after the ")". */
    static long ticksOf(String stat) {
        int close = stat.lastIndexOf(')');
        if (close < 0) return 0;
        String[] f = stat.substring(close + 2).trim().split(" ");
        if (f.length < 13) return 0;
        return Long.parseLong(f[11]) + Long.parseLong(f[12]);
    }

    /**
     * CPU time (ns) of one thread or process: the first field of schedstat (time on a CPU,
     * ns), else utime + stime of stat (ticks).
     */
    static long cpuNanos(Path dir) throws IOException {
        try {
            String s = Files.readString(dir.resolve("schedstat"), StandardCharsets.UTF_8).trim();
            return Long.parseLong(s.split(" ")[0]);
        } catch (IOException | NumberFormatException e) {
            return (long) (ticksOf(Files.readString(dir.resolve("stat"), StandardCharsets.UTF_8)) * (1e9 / CLK_TCK));
        }
    }

    /** CPU ns of the GC threads and of all threads of the process, now. */
    static long[] cpuNanos() throws IOException {
        long gc = 0, all = 0;
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(Paths.get("/proc/self/task"))) {
            for (Path t : ds) {
                try {
                    String comm = Files.readString(t.resolve("comm"), StandardCharsets.UTF_8).trim();
                    long ns = cpuNanos(t);
                    all += ns;
                    if (isGcThread(comm)) gc += ns;
                } catch (IOException e) {
                    // a thread that ended between the listing and the read
                }
            }
        }
        return new long[] {gc, all};
    }

    static long vmHWM() {
        try {
            for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
                if (line.startsWith("VmHWM:")) {
                    return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
                }
            }
        } catch (IOException | NumberFormatException e) {
            return 0;
        }
        return 0;
    }

    static long usedAfterGc() {
        System.gc();
        MemoryUsage u = ManagementFactory.getMemoryMXBean().getHeapMemoryUsage();
        return u.getUsed();
    }

    static long gcCount() {
        long c = 0;
        for (GarbageCollectorMXBean b : ManagementFactory.getGarbageCollectorMXBeans()) c += Math.max(0, b.getCollectionCount());
        return c;
    }

    static String gcBeans() {
        StringBuilder sb = new StringBuilder("{");
        boolean first = true;
        for (GarbageCollectorMXBean b : ManagementFactory.getGarbageCollectorMXBeans()) {
            if (!first) sb.append(',');
            first = false;
            sb.append('"').append(b.getName().replace("\"", "")).append("\":[")
              .append(b.getCollectionCount()).append(',').append(b.getCollectionTime()).append(']');
        }
        return sb.append('}').toString();
    }

    // ---- main ----------------------------------------------------------------------------

    public static void main(String[] args) throws Exception {
        long live = 64L << 20;
        double alloc = 12;
        int workers = Runtime.getRuntime().availableProcessors();
        double bytesPerVnode = 0;
        int vnodes = 0;
        boolean calibrate = false;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "-live": live = Long.parseLong(args[++i]); break;
                case "-alloc": alloc = Double.parseDouble(args[++i]); break;
                case "-workers": workers = Integer.parseInt(args[++i]); break;
                case "-bytes-per-vnode": bytesPerVnode = Double.parseDouble(args[++i]); break;
                case "-vnodes": vnodes = Integer.parseInt(args[++i]); break;
                case "calibrate": calibrate = true; break;
                default:
                    System.err.println("usage: GcBench [-live BYTES] [-vnodes N] [-alloc X] [-workers N] [-bytes-per-vnode B] [calibrate]");
                    System.exit(2);
            }
        }
        if (calibrate) {
            // What one vnode costs in this JVM's heap: a heap of n, less the empty heap.
            long base = usedAfterGc();
            int n = 200_000;
            Heap h = buildHeap(n);
            long used = usedAfterGc();
            System.out.println(String.format(Locale.ROOT,
                "{\"mode\":\"calibrate\",\"vnodes\":%d,\"bytes_per_vnode\":%.2f,\"java_version\":\"%s\",\"gc\":%s,\"check\":%d}",
                n, (double) (used - base) / n, System.getProperty("java.version"), gcBeans(), h.n));
            return;
        }
        if (bytesPerVnode <= 0) bytesPerVnode = 316;
        // The live set: -vnodes (costlab passes gcbench's count, so both runtimes hold the
        // same objects), else as many as fit in -live.
        int n = vnodes > 0 ? vnodes : (int) Math.max(1, live / bytesPerVnode);
        long t0 = System.nanoTime();
        Heap h;
        try {
            h = buildHeap(n);
        } catch (OutOfMemoryError e) {
            // Status 0: the JSON says what happened; costlab reads it as a point with no share.
            System.out.println("{\"mode\":\"heap\",\"oom\":true,\"phase\":\"build\"}");
            return;
        }
        long liveBytes = usedAfterGc();
        double build = (System.nanoTime() - t0) / 1e9;
        long ops = Math.max(1, (long) (alloc * live / REQUEST_BYTES));
        long[] a = cpuNanos();
        long cyclesA = gcCount();
        String beansA = gcBeans();
        long w0 = System.nanoTime();
        final Heap heap = h;
        final long[] sums = new long[workers];
        final boolean[] oom = new boolean[1];
        final long[] workerNs = new long[1];
        List<Thread> ts = new ArrayList<>();
        for (int w = 0; w < workers; w++) {
            final int wi = w;
            final long share = ops / workers + (w < ops % workers ? 1 : 0);
            Thread t = new Thread(() -> {
                Rng r = new Rng(wi + 7);
                Request[] inflight = new Request[16];
                long s = 0;
                try {
                    for (long i = 0; i < share; i++) s += statCall(heap, r, inflight, (int) i);
                } catch (OutOfMemoryError e) {
                    oom[0] = true;
                }
                sums[wi] = s;
                synchronized (workerNs) {
                    workerNs[0] += ManagementFactory.getThreadMXBean().getCurrentThreadCpuTime();
                }
            }, "worker-" + w);
            ts.add(t);
            t.start();
        }
        for (Thread t : ts) t.join();
        double wall = (System.nanoTime() - w0) / 1e9;
        // The worker threads have ended; their CPU time is read before they do (below).
        long[] b = cpuNanos();
        long cycles = gcCount() - cyclesA;
        if (oom[0]) {
            System.out.println("{\"mode\":\"heap\",\"oom\":true,\"phase\":\"work\"}");
            return;
        }
        long sum = 0;
        for (long s : sums) sum ^= s;
        double gcS = (b[0] - a[0]) / 1e9, allS = (b[1] - a[1] + workerNs[0]) / 1e9;
        System.out.println(String.format(Locale.ROOT,
            "{\"mode\":\"heap\",\"oom\":false,\"vnodes\":%d,\"live_target\":%d,\"live_bytes\":%d,\"build_s\":%.3f,"
                + "\"ops\":%d,\"alloc_bytes\":%d,\"wall_s\":%.4f,\"gc_cpu_share\":%.6f,\"gc_cpu_s\":%.3f,\"cpu_s\":%.3f,"
                + "\"gc_cycles\":%d,\"peak_rss_bytes\":%d,\"max_heap_bytes\":%d,\"workers\":%d,\"java_version\":\"%s\","
                + "\"gc_beans_before\":%s,\"gc_beans\":%s,\"checksum\":%d}",
            h.n, live, liveBytes, build, ops, ops * REQUEST_BYTES, wall, allS > 0 ? gcS / allS : 0.0, gcS, allS,
            cycles, vmHWM(), Runtime.getRuntime().maxMemory(), workers, System.getProperty("java.version"),
            beansA, gcBeans(), sum));
    }
}
