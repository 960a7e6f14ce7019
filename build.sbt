// lineagestore build. The one version source is the top-level VERSION file (also read by pyproject.toml).
// Run it through dev/sbt, which bootstraps sbt and the Spark jars from Maven Central and PyPI only.

import scala.xml.{Elem, Node => XmlNode}
import scala.xml.transform.{RewriteRule, RuleTransformer}

val sparkVersion = "4.3.0"
val hadoopVersion = "3.5.0"
val rocksdbVersion = "9.8.4"
val scalatestVersion = "3.2.19"
val slf4jVersion = "2.0.17"
val awsSdkVersion = "2.35.4" // what hadoop-aws 3.5.0 is tested with (its bundle at run time)
val zstdJniVersion = "1.5.7-7" // Spark 4.3.0 ships it: compresses delta records
val log4jVersion = "2.25.4" // Spark 4.3.0's; test logging goes through log4j2 in both subprojects

ThisBuild / organization := "io.lineagestore"
ThisBuild / version := IO.read((ThisBuild / baseDirectory).value / "VERSION").trim
ThisBuild / scalaVersion := "2.13.18"
ThisBuild / scalacOptions ++= Seq("-deprecation", "-feature", "-unchecked", "-release:17")
ThisBuild / javacOptions ++= Seq("--release", "17")

// Spark 4.3.0 is taken from the jars the pyspark 4.3.0 distribution on PyPI carries (the exact runtime
// PySpark users get), because the Maven Central reachable here has no Spark 4.3.0 artifacts. dev/sbt
// fetches and unpacks them and passes their directory as -Dlineagestore.spark.jars.
lazy val sparkJarsDir: File = {
  val cacheRoot = sys.env
    .get("LINEAGESTORE_CACHE")
    .map(file)
    .getOrElse(file(sys.props("user.home")) / ".cache" / "lineagestore")
  sys.props
    .get("lineagestore.spark.jars")
    .orElse(sys.env.get("LINEAGESTORE_SPARK_JARS"))
    .map(file)
    .getOrElse(cacheRoot / "spark" / sparkVersion / "jars")
}

lazy val sparkJars = taskKey[Classpath]("Spark runtime jars (provided at run time by Spark itself)")

// Spark 4 on Java 17 needs these (the list Spark's launcher adds, JavaModuleOptions).
lazy val java17Options = Seq(
  "-XX:+IgnoreUnrecognizedVMOptions",
  "--add-modules=jdk.incubator.vector",
  "--add-opens=java.base/java.lang=ALL-UNNAMED",
  "--add-opens=java.base/java.lang.invoke=ALL-UNNAMED",
  "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
  "--add-opens=java.base/java.io=ALL-UNNAMED",
  "--add-opens=java.base/java.net=ALL-UNNAMED",
  "--add-opens=java.base/java.nio=ALL-UNNAMED",
  "--add-opens=java.base/java.util=ALL-UNNAMED",
  "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
  "--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED",
  "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
  "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
  "--add-opens=java.base/sun.nio.cs=ALL-UNNAMED",
  "--add-opens=java.base/sun.security.action=ALL-UNNAMED",
  "--add-opens=java.base/sun.util.calendar=ALL-UNNAMED",
  "-Djdk.reflect.useDirectMethodHandle=false",
  "-Dio.netty.tryReflectionSetAccessible=true"
)

// One forked test JVM at a time: the machines have 2 cores.
Global / concurrentRestrictions += Tags.limit(Tags.ForkedTestGroup, 1)

lazy val commonSettings = Seq(
  Test / fork := true,
  Test / parallelExecution := false,
  Test / javaOptions ++= Seq("-Xmx4g", "-Xss4m") ++ java17Options,
  Test / envVars += "SPARK_LOCAL_IP" -> "127.0.0.1",
  Test / testOptions += Tests.Argument(TestFrameworks.ScalaTest, "-oD"),
  Test / unmanagedResourceDirectories += (ThisBuild / baseDirectory).value / "jvm" / "test-resources"
)

lazy val root = (project in file("."))
  .aggregate(core, spark)
  .settings(
    name := "lineagestore",
    publish / skip := true
  )

// The format, lineage, storage and engine: no Spark dependency.
lazy val core = (project in file("jvm/core"))
  .settings(commonSettings)
  .settings(
    name := "lineagestore-core",
    publish / skip := true, // its classes ship inside lineagestore-spark
    libraryDependencies ++= Seq(
      "org.rocksdb" % "rocksdbjni" % rocksdbVersion % Provided,
      "org.apache.hadoop" % "hadoop-client-api" % hadoopVersion % Provided,
      "org.slf4j" % "slf4j-api" % slf4jVersion % Provided,
      "com.github.luben" % "zstd-jni" % zstdJniVersion % Provided,
      // server-side copy on S3 (storage.s3): compiled against, present at run time only with s3a
      ("org.apache.hadoop" % "hadoop-aws" % hadoopVersion % Provided).intransitive(),
      "software.amazon.awssdk" % "s3" % awsSdkVersion % Provided,
      "com.github.luben" % "zstd-jni" % zstdJniVersion % Test,
      "org.scalatest" %% "scalatest" % scalatestVersion % Test,
      "org.rocksdb" % "rocksdbjni" % rocksdbVersion % Test,
      "org.apache.hadoop" % "hadoop-client-api" % hadoopVersion % Test,
      "org.apache.hadoop" % "hadoop-client-runtime" % hadoopVersion % Test,
      "org.slf4j" % "slf4j-api" % slf4jVersion % Test,
      "org.apache.logging.log4j" % "log4j-slf4j2-impl" % log4jVersion % Test,
      "org.apache.logging.log4j" % "log4j-core" % log4jVersion % Test
    )
  )

// The StateStoreProvider and the thin shim in Spark's package; the one published artifact.
lazy val spark = (project in file("jvm/spark"))
  .dependsOn(core % "compile->compile;test->test")
  .settings(commonSettings)
  .settings(
    name := "lineagestore-spark",
    sparkJars := {
      val dir = sparkJarsDir
      val marker = dir / s"spark-sql_2.13-$sparkVersion.jar"
      if (!marker.isFile)
        sys.error(
          s"Spark $sparkVersion jars not found in $dir (no $marker). Run the build through dev/sbt, which " +
            "fetches them from the pyspark distribution on PyPI, or point -Dlineagestore.spark.jars " +
            "(or LINEAGESTORE_SPARK_JARS) at a directory holding Spark's jars."
        )
      // sbt manages the Scala library itself.
      (dir * "*.jar").get
        .filterNot(f => f.getName.startsWith("scala-library-") || f.getName.startsWith("scala-reflect-"))
        .sortBy(_.getName)
        .classpath
    },
    // Compile against Spark, and run tests on it; never packaged or listed as a dependency (provided).
    Compile / unmanagedJars ++= sparkJars.value,
    libraryDependencies ++= Seq(
      "org.scalatest" %% "scalatest" % scalatestVersion % Test
    ),
    // The published jar carries the core classes too.
    Compile / packageBin / mappings ++= (core / Compile / packageBin / mappings).value,
    Compile / packageSrc / mappings ++= (core / Compile / packageSrc / mappings).value,
    // ...so the POM must not list the unpublished core module.
    pomPostProcess := { (node: XmlNode) =>
      new RuleTransformer(new RewriteRule {
        override def transform(n: XmlNode): Seq[XmlNode] = n match {
          case e: Elem
              if e.label == "dependency" && (e \ "artifactId").text.startsWith("lineagestore-core") =>
            Seq.empty
          case other => Seq(other)
        }
      }).transform(node).head
    }
  )
