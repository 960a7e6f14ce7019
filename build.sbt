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

// The suites against the real S3 server need the s3a jars: dev/test runs sbt through
// `python -m lineagestore.testing.with_s3`, which starts the server and passes the jars' paths. On the test
// class path they replace hadoop-aws and the modular AWS SDK compiled against (the same versions; the bundle
// holds every SDK module hadoop-aws needs).
lazy val s3aTestJars: Seq[File] =
  sys.env
    .get("LINEAGESTORE_S3A_JARS")
    .toSeq
    .flatMap(_.split(java.io.File.pathSeparator))
    .filter(_.nonEmpty)
    .map(file)

lazy val s3aTestSettings = Seq(
  Test / unmanagedJars ++= s3aTestJars.map(Attributed.blank),
  libraryDependencies += "org.apache.commons" % "commons-lang3" % "3.20.0" % Test, // hadoop-aws uses it; Spark ships it
  Test / dependencyClasspath := {
    val cp = (Test / dependencyClasspath).value
    def replaced(m: ModuleID) = m.organization == "software.amazon.awssdk" || m.name == "hadoop-aws"
    if (s3aTestJars.isEmpty) cp else cp.filterNot(_.get(moduleID.key).exists(replaced))
  }
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
  .settings(s3aTestSettings)
  .settings(
    name := "lineagestore-core",
    publish / skip := true, // its classes ship inside lineagestore-spark
    // io.lineagestore.BuildInfo: the versions this build is for, from the vals above (one source). GenerateDocs
    // writes the Spark version into the Python package, which checks the installed pyspark against it.
    Compile / sourceGenerators += Def.task {
      val out = (Compile / sourceManaged).value / "io" / "lineagestore" / "BuildInfo.scala"
      IO.write(
        out,
        s"""package io.lineagestore
           |
           |/** Generated by build.sbt. */
           |object BuildInfo {
           |  val version = "${version.value}"
           |  val sparkVersion = "$sparkVersion"
           |  val scalaBinaryVersion = "${scalaBinaryVersion.value}"
           |}
           |""".stripMargin
      )
      Seq(out)
    }.taskValue,
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
    // Read by the Python package to check a lineagestore jar it did not bring itself.
    Compile / packageBin / packageOptions += Package.ManifestAttributes(
      "Lineagestore-Version" -> version.value,
      "Lineagestore-Spark-Version" -> sparkVersion
    ),
    // `spark/publish` writes a Maven repository (POM, jar, sources, scaladoc, checksums) into the directory
    // named by -Dlineagestore.publishTo=<dir> (e.g. SBT_OPTS=-Dlineagestore.publishTo=/tmp/repo dev/sbt
    // spark/publish), for `spark-submit --packages ... --repositories file://<dir>`; never ~/.m2. No remote
    // repository is configured. integration-tests/test_spark_submit_packages.py publishes into a temp one.
    publishTo := sys.props.get("lineagestore.publishTo").map(d => MavenCache("lineagestore-dir", file(d))),
    // -Dlineagestore.publishDocs=false leaves the scaladoc jar out (it takes most of the publish's time)
    Compile / packageDoc / publishArtifact := !sys.props.get("lineagestore.publishDocs").contains("false"),
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
