package io.lineagestore.bench;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.ForeachWriter;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.execution.streaming.sources.LowLatencyMemoryStream;
import org.apache.spark.sql.streaming.DataStreamWriter;
import org.apache.spark.sql.streaming.StreamingQuery;
import org.apache.spark.sql.streaming.Trigger;

import io.lineagestore.spark.RealTimeQuery;

import scala.Tuple3;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The JVM half of realtime_bench.py (issue 48): a real-time source fed by a producer thread, a sink, and the
 * two ways to start a real-time query (lineagestore's helper, Spark's provider as Spark documents it).
 *
 * <p>Latency must be measured on one clock: the producer stamps each record with {@link System#nanoTime()}
 * just before handing it to the source, and the sink takes {@link System#nanoTime()} when the row reaches it.
 * In local mode the source's reader, the stateful operator and the sink all run in this JVM, so both stamps
 * come from the same monotonic clock; nothing crosses into Python while records flow.
 *
 * <p>Records are {@code (key, id, created_ns)}: {@code key} uniform in {@code [0, keys)} (the aggregation
 * groups by it), {@code id} the record's sequence number except that every {@code dupEvery}-th record repeats
 * the previous id (dropDuplicates on {@code id} drops it, so that path is exercised too).
 */
public final class RealTimeLatency {
  private RealTimeLatency() {}

  private static final ConcurrentHashMap<String, ConcurrentLinkedQueue<long[]>> ARRIVALS =
      new ConcurrentHashMap<>();

  /** This JVM's clock, the one records are stamped with (Python marks the warm-up's end with it). */
  public static long now() {
    return System.nanoTime();
  }

  /** Spark's real-time test source ({@code LowLatencyMemoryStream}), {@code partitions} reader tasks. */
  public static LowLatencyMemoryStream<Tuple3<Long, Long, Long>> source(SparkSession spark, int partitions) {
    return LowLatencyMemoryStream.apply(
        spark, partitions, Encoders.tuple(Encoders.LONG(), Encoders.LONG(), Encoders.LONG()));
  }

  /** Feeds a source at a fixed rate from its own thread, one record per {@code addData}. */
  public static final class Producer implements Runnable {
    private final LowLatencyMemoryStream<Tuple3<Long, Long, Long>> stream;
    private final long intervalNs;
    private final int keys;
    private final int dupEvery;
    private final Random random;
    private final Thread thread;
    private volatile boolean running = true;
    private volatile long sent = 0;
    private volatile Throwable failure = null;
    private final List<long[]> created = new ArrayList<>(); // {created_ns, id}, guarded by itself

    Producer(
        LowLatencyMemoryStream<Tuple3<Long, Long, Long>> stream,
        double ratePerSecond,
        int keys,
        int dupEvery,
        long seed) {
      this.stream = stream;
      this.intervalNs = (long) (TimeUnit.SECONDS.toNanos(1) / ratePerSecond);
      this.keys = keys;
      this.dupEvery = dupEvery;
      this.random = new Random(seed);
      this.thread = new Thread(this, "realtime-bench-producer");
      this.thread.setDaemon(true);
    }

    @Override
    public void run() {
      long next = System.nanoTime();
      long id = 0;
      try {
        while (running) {
          long wait = next - System.nanoTime();
          if (wait > 0) LockSupport.parkNanos(wait);
          long n = sent;
          id = (dupEvery > 0 && n % dupEvery == dupEvery - 1) ? id : n;
          long stamp = System.nanoTime();
          List<Tuple3<Long, Long, Long>> one =
              Collections.singletonList(new Tuple3<>((long) random.nextInt(keys), id, stamp));
          stream.addData(CollectionConverters.asScala(one));
          synchronized (created) {
            created.add(new long[] {stamp, id});
          }
          sent = n + 1;
          // a fixed schedule, not a fixed pause: a late record does not delay the next ones
          next += intervalNs;
        }
      } catch (Throwable t) {
        failure = t;
      }
    }

    /** Stops the thread; returns how many records it sent. */
    public long stop() throws InterruptedException {
      running = false;
      thread.join(TimeUnit.SECONDS.toMillis(10));
      if (failure != null) throw new IllegalStateException("the bench's producer failed", failure);
      return sent;
    }

    /**
     * How many records it created in {@code [fromNs, toNs)}: all of them ({@code distinctIds} false) or one per
     * id (true: those dropDuplicates lets through, a duplicate's id first seen before {@code fromNs} not
     * counted).
     */
    public long createdBetween(long fromNs, long toNs, boolean distinctIds) {
      synchronized (created) {
        java.util.HashSet<Long> seen = new java.util.HashSet<>();
        long n = 0;
        for (long[] c : created) {
          boolean fresh = seen.add(c[1]);
          if (c[0] >= fromNs && c[0] < toNs && (fresh || !distinctIds)) n++;
        }
        return n;
      }
    }
  }

  public static Producer produce(
      LowLatencyMemoryStream<Tuple3<Long, Long, Long>> stream,
      double ratePerSecond,
      int keys,
      int dupEvery,
      long seed) {
    Producer p = new Producer(stream, ratePerSecond, keys, dupEvery, seed);
    p.thread.start();
    return p;
  }

  /** Records, per run, each row's {@code created_ns} and the moment it reached the sink. */
  public static final class LatencySink extends ForeachWriter<Row> {
    private final String run;

    public LatencySink(String run) {
      this.run = run;
    }

    @Override
    public boolean open(long partitionId, long epochId) {
      return true;
    }

    @Override
    public void process(Row row) {
      long arrived = System.nanoTime();
      long created = row.getLong(row.fieldIndex("created_ns"));
      ARRIVALS.computeIfAbsent(run, r -> new ConcurrentLinkedQueue<>()).add(new long[] {created, arrived});
    }

    @Override
    public void close(Throwable errorOrNull) {}
  }

  private static DataStreamWriter<Row> sinkTo(DataStreamWriter<Row> w, String run) {
    return w.outputMode("update").foreach(new LatencySink(run));
  }

  /** Starts {@code df} in real-time mode on lineagestore through its helper ({@code RealTimeQuery}). */
  public static StreamingQuery startLineagestore(
      Dataset<Row> df, String checkpoint, String batchDuration, String run) {
    return RealTimeQuery.start(
        df, checkpoint, batchDuration, RealTimeQuery.DefaultFirstBatchTimeoutMs(), w -> sinkTo(w, run));
  }

  /**
   * Starts {@code df} in real-time mode as Spark documents it: the session names Spark's provider
   * ({@code provider}) under {@code providerKey} while the query starts (Spark refuses real-time mode for any
   * other value, even for a stateless query), then gets back what it held before.
   */
  public static StreamingQuery startSpark(
      Dataset<Row> df, String checkpoint, String batchDuration, String run, String providerKey, String provider)
      throws Exception {
    SparkSession spark = df.sparkSession();
    scala.Option<String> before = spark.conf().getOption(providerKey);
    spark.conf().set(providerKey, provider);
    try {
      return sinkTo(df.writeStream(), run)
          .option("checkpointLocation", checkpoint)
          .trigger(Trigger.RealTime(batchDuration))
          .start();
    } finally {
      if (before.isDefined()) spark.conf().set(providerKey, before.get());
      else spark.conf().unset(providerKey);
    }
  }

  /** How many rows of {@code run} the sink received whose record was created in {@code [fromNs, toNs)}. */
  public static long arrivedBetween(String run, long fromNs, long toNs) {
    ConcurrentLinkedQueue<long[]> rows = ARRIVALS.get(run);
    if (rows == null) return 0;
    long n = 0;
    for (long[] r : rows) if (r[0] >= fromNs && r[0] < toNs) n++;
    return n;
  }

  /**
   * The latencies (microseconds) of rows of {@code run} whose record was created in {@code [fromNs, toNs)}, and
   * forgets the run; comma-separated (one string: py4j would make a call per element of an array).
   */
  public static String drain(String run, long fromNs, long toNs) {
    ConcurrentLinkedQueue<long[]> rows = ARRIVALS.remove(run);
    if (rows == null) return "";
    List<String> out = new ArrayList<>();
    for (long[] r : rows) {
      if (r[0] >= fromNs && r[0] < toNs) out.add(Long.toString((r[1] - r[0]) / 1000));
    }
    return String.join(",", out);
  }
}
