package io.lineagestore.bench;

import java.io.FilterOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.URI;
import java.net.URISyntaxException;
import java.util.EnumSet;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.CreateFlag;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FSInputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FsServerDefaults;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.Syncable;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.util.Progressable;

/**
 * Benchmark-only Hadoop FileSystem: the local disk under the scheme {@code lsbench:///}, counting every
 * request a client sends, by type, area and file kind, with bytes and time.
 *
 * <p>It is a {@link RawLocalFileSystem} (no {@code .crc} side files, like an object store) registered for
 * both APIs Spark uses: {@code fs.lsbench.impl} (FileSystem) and {@code fs.AbstractFileSystem.lsbench.impl}
 * ({@link Fs}, FileContext), so Spark's checkpoint file manager, its RocksDB file manager and lineagestore's
 * HadoopBlobStore all go through it. Only the outermost call on a thread is counted (an {@code exists} that
 * calls {@code getFileStatus} is one HEAD), so the counts are the requests a client asked for, named as the
 * S3 requests they would be: PUT (create), GET (open), LIST (listStatus), DELETE, RENAME (COPY + DELETE on
 * S3), HEAD (getFileStatus / exists), MKDIR.
 *
 * <p>Keys of {@link #snapshot()}: {@code count|OP|area|kind}, {@code bytes|OP|area|kind},
 * {@code nanos|OP|area|kind}; area is {@code state} for paths with a {@code /state/} component, else
 * {@code meta}; kind is the state file kind (crc, sst, zip, delta, changelog, snapshot, dir, other).
 *
 * <p>Compiled by integration-tests/bench/run.py with javac against Spark's Hadoop jars at run time.
 */
public class CountingFileSystem extends RawLocalFileSystem {
  public static final String SCHEME = "lsbench";
  private static final URI NAME = URI.create(SCHEME + ":///");
  private static final ConcurrentHashMap<String, LongAdder> COUNTERS = new ConcurrentHashMap<>();
  private static final ThreadLocal<int[]> DEPTH = ThreadLocal.withInitial(() -> new int[1]);

  /** All counters, sorted by key. */
  public static Map<String, Long> snapshot() {
    TreeMap<String, Long> out = new TreeMap<>();
    COUNTERS.forEach((k, v) -> out.put(k, v.sum()));
    return out;
  }

  public static void reset() {
    COUNTERS.clear();
  }

  static void add(String key, long n) {
    COUNTERS.computeIfAbsent(key, k -> new LongAdder()).add(n);
  }

  static String area(Path p) {
    String s = p == null ? "" : p.toUri().getPath();
    return s.contains("/state/") || s.endsWith("/state") ? "state" : "meta";
  }

  static String kind(Path p) {
    if (p == null) return "other";
    String n = p.getName();
    if (n.endsWith(".crc")) return "crc";
    if (n.contains(".sst")) return "sst";
    if (n.contains(".zip")) return "zip";
    if (n.contains(".changelog")) return "changelog";
    if (n.contains(".delta")) return "delta";
    if (n.contains(".snapshot")) return "snapshot";
    if (!n.contains(".")) return "dir";
    return "other";
  }

  static String suffix(String op, Path p) {
    return op + "|" + area(p) + "|" + kind(p);
  }

  interface Call<T> {
    T run() throws IOException;
  }

  /** Runs {@code call}; counts it (and its time) only if no counted call encloses it on this thread. */
  static <T> T counted(String op, Path p, Call<T> call) throws IOException {
    int[] depth = DEPTH.get();
    boolean outer = depth[0]++ == 0;
    long t0 = System.nanoTime();
    try {
      return call.run();
    } finally {
      depth[0]--;
      if (outer) {
        String s = suffix(op, p);
        add("count|" + s, 1);
        add("nanos|" + s, System.nanoTime() - t0);
      }
    }
  }

  @Override
  public URI getUri() {
    return NAME;
  }

  @Override
  public String getScheme() {
    return SCHEME;
  }

  // ------------------------------------------------------------------------------------------- PUT
  private FSDataOutputStream countOut(Path f, FSDataOutputStream out) {
    return new FSDataOutputStream(new CountingOutputStream(out, "bytes|" + suffix("PUT", f)), null);
  }

  @Override
  public FSDataOutputStream create(
      Path f, boolean overwrite, int bufferSize, short replication, long blockSize, Progressable progress)
      throws IOException {
    return counted("PUT", f, () -> countOut(f,
        super.create(f, overwrite, bufferSize, replication, blockSize, progress)));
  }

  @Override
  public FSDataOutputStream create(
      Path f, FsPermission permission, boolean overwrite, int bufferSize, short replication,
      long blockSize, Progressable progress) throws IOException {
    return counted("PUT", f, () -> countOut(f,
        super.create(f, permission, overwrite, bufferSize, replication, blockSize, progress)));
  }

  @Override
  public FSDataOutputStream createNonRecursive(
      Path f, FsPermission permission, EnumSet<CreateFlag> flags, int bufferSize, short replication,
      long blockSize, Progressable progress) throws IOException {
    return counted("PUT", f, () -> countOut(f,
        super.createNonRecursive(f, permission, flags, bufferSize, replication, blockSize, progress)));
  }

  @Override
  public FSDataOutputStream createNonRecursive(
      Path f, FsPermission permission, boolean overwrite, int bufferSize, short replication,
      long blockSize, Progressable progress) throws IOException {
    return counted("PUT", f, () -> countOut(f,
        super.createNonRecursive(f, permission, overwrite, bufferSize, replication, blockSize, progress)));
  }

  // ------------------------------------------------------------------------------------------- GET
  @Override
  public FSDataInputStream open(Path f, int bufferSize) throws IOException {
    return counted("GET", f, () ->
        new FSDataInputStream(new CountingInputStream(super.open(f, bufferSize), "bytes|" + suffix("GET", f))));
  }

  // ------------------------------------------------------------------------------------ the others
  /**
   * A plain copy of a status: RawLocalFileSystem's own statuses load their permission lazily through
   * {@code new File(URI)}, which accepts only file: URIs.
   */
  private static FileStatus plain(FileStatus s) {
    FsPermission perm = s.isDirectory() ? FsPermission.getDirDefault() : FsPermission.getFileDefault();
    return new FileStatus(s.getLen(), s.isDirectory(), s.getReplication(), s.getBlockSize(),
        s.getModificationTime(), s.getAccessTime(), perm, "", "", s.getPath());
  }

  @Override
  public FileStatus[] listStatus(Path f) throws IOException {
    return counted("LIST", f, () -> {
      FileStatus[] all = super.listStatus(f);
      FileStatus[] out = new FileStatus[all.length];
      for (int i = 0; i < all.length; i++) out[i] = plain(all[i]);
      return out;
    });
  }

  @Override
  public boolean delete(Path f, boolean recursive) throws IOException {
    return counted("DELETE", f, () -> super.delete(f, recursive));
  }

  @Override
  public boolean rename(Path src, Path dst) throws IOException {
    return counted("RENAME", dst, () -> super.rename(src, dst));
  }

  @Override
  public FileStatus getFileStatus(Path f) throws IOException {
    return counted("HEAD", f, () -> plain(super.getFileStatus(f)));
  }

  @Override
  public FileStatus getFileLinkStatus(Path f) throws IOException {
    return counted("HEAD", f, () -> plain(super.getFileLinkStatus(f)));
  }

  @Override
  public boolean exists(Path f) throws IOException {
    return counted("HEAD", f, () -> super.exists(f));
  }

  @Override
  public boolean mkdirs(Path f, FsPermission permission) throws IOException {
    return counted("MKDIR", f, () -> super.mkdirs(f, permission));
  }

  @Override
  public boolean mkdirs(Path f) throws IOException {
    return counted("MKDIR", f, () -> super.mkdirs(f));
  }

  // --------------------------------------------------------------------------------------- streams
  static final class CountingOutputStream extends FilterOutputStream implements Syncable {
    private final FSDataOutputStream inner;
    private final String key;

    CountingOutputStream(FSDataOutputStream inner, String key) {
      super(inner);
      this.inner = inner;
      this.key = key;
    }

    @Override
    public void write(int b) throws IOException {
      inner.write(b);
      add(key, 1);
    }

    @Override
    public void write(byte[] b, int off, int len) throws IOException {
      inner.write(b, off, len);
      add(key, len);
    }

    @Override
    public void hflush() throws IOException {
      inner.hflush();
    }

    @Override
    public void hsync() throws IOException {
      inner.hsync();
    }
  }

  static final class CountingInputStream extends FSInputStream {
    private final FSDataInputStream in;
    private final String key;

    CountingInputStream(FSDataInputStream in, String key) {
      this.in = in;
      this.key = key;
    }

    private int counted(int n) {
      if (n > 0) add(key, n);
      return n;
    }

    @Override
    public int read() throws IOException {
      int b = in.read();
      if (b >= 0) add(key, 1);
      return b;
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
      return counted(in.read(b, off, len));
    }

    @Override
    public int read(long position, byte[] b, int off, int len) throws IOException {
      return counted(in.read(position, b, off, len));
    }

    @Override
    public void seek(long pos) throws IOException {
      in.seek(pos);
    }

    @Override
    public long getPos() throws IOException {
      return in.getPos();
    }

    @Override
    public boolean seekToNewSource(long targetPos) {
      return false;
    }

    @Override
    public int available() throws IOException {
      return in.available();
    }

    @Override
    public void close() throws IOException {
      in.close();
    }
  }

  /** The FileContext side ({@code fs.AbstractFileSystem.lsbench.impl}). */
  public static class Fs extends DelegateToFileSystem {
    public Fs(URI uri, Configuration conf) throws IOException, URISyntaxException {
      super(uri, new CountingFileSystem(), conf, SCHEME, false);
    }

    @Override
    public int getUriDefaultPort() {
      return -1;
    }

    @Override
    public FsServerDefaults getServerDefaults(Path f) throws IOException {
      return fsImpl.getServerDefaults(f);
    }

    @Override
    public boolean isValidName(String src) {
      return true;
    }
  }
}
