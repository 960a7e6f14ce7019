package io.lineagestore.storage

import java.io.IOException

/** The blob store could not be reached or refused an operation (wrong credentials, a missing bucket, an
  * unreachable endpoint, errors that outlasted the client's retries). The message names the operation, the
  * full location, the endpoint when there is one, what the cause looks like and what to do, and says that
  * committed state is untouched; the original exception is the cause.
  *
  * @param operation
  *   what lineagestore was doing: "write", "read", "check", "list", "delete"
  * @param location
  *   the full URI of the blob or directory
  * @param endpoint
  *   where the filesystem sends requests, with the setting that chose it (None when not applicable)
  */
class BlobStoreAccessException(
    val operation: String,
    val location: String,
    val endpoint: Option[String],
    val problem: BlobStoreAccessException.Problem,
    cause: Throwable
) extends IOException(BlobStoreAccessException.message(operation, location, endpoint, problem, cause), cause)

object BlobStoreAccessException {

  /** What the cause chain looks like, most specific first. */
  sealed abstract class Problem(val what: String, val todo: String)
  case object Credentials
      extends Problem(
        "the store refused the credentials or denied access (403)",
        "check the credentials (for s3a: fs.s3a.access.key / fs.s3a.secret.key, or per bucket " +
          "fs.s3a.bucket.<bucket>.access.key / .secret.key, and fs.s3a.aws.credentials.provider) and the " +
          "bucket's permissions"
      )
  case object MissingBucket
      extends Problem(
        "the bucket (or container) does not exist at this endpoint",
        "create the bucket, or fix the checkpoint location or the endpoint (for s3a: fs.s3a.endpoint or " +
          "fs.s3a.bucket.<bucket>.endpoint)"
      )
  case object Unreachable
      extends Problem(
        "the endpoint cannot be reached (connection refused, unknown host or no route)",
        "check the endpoint (for s3a: fs.s3a.endpoint or fs.s3a.bucket.<bucket>.endpoint, " +
          "fs.s3a.connection.ssl.enabled) and that the store is up and reachable from every executor"
      )
  case object TimedOut
      extends Problem(
        "the endpoint did not answer in time",
        "check the store's health and the network; the timeouts are fs.s3a.connection.timeout and " +
          "fs.s3a.connection.request.timeout for s3a"
      )
  case object ServerError
      extends Problem(
        "the store kept answering with server errors or throttling (5xx, SlowDown) through the client's retries",
        "this is usually transient: restart the query (for s3a the retries are fs.s3a.attempts.maximum, " +
          "fs.s3a.retry.limit and fs.s3a.retry.throttle.limit)"
      )
  case object Other
      extends Problem(
        "the filesystem reported an I/O error",
        "see the cause below; check the endpoint, the credentials and the store's health"
      )

  private def chain(t: Throwable): Seq[Throwable] =
    Iterator.iterate(t)(_.getCause).takeWhile(_ != null).take(20).toSeq

  /** Classifies a failure by its cause chain (class names, so no filesystem client is needed here). */
  def classify(t: Throwable): Problem = {
    val causes = chain(t)
    val names = causes.map(_.getClass.getName)
    val text = causes.map(c => Option(c.getMessage).getOrElse("")).mkString("\n")
    def named(suffix: String) = names.exists(_.endsWith(suffix))
    if (
      named("AccessDeniedException") || text.contains("InvalidAccessKeyId") ||
      text.contains("SignatureDoesNotMatch") || text.contains("Status Code: 403")
    ) Credentials
    else if (named("UnknownStoreException") || text.contains("NoSuchBucket")) MissingBucket
    else if (
      causes.exists {
        case _: java.net.ConnectException | _: java.net.UnknownHostException |
            _: java.net.NoRouteToHostException =>
          true
        case _ => false
      } || text.contains("Connection refused") || named("ConnectTimeoutException")
    ) Unreachable
    else if (
      causes.exists(_.isInstanceOf[java.net.SocketTimeoutException]) || named("ApiCallTimeoutException") ||
      named("ApiCallAttemptTimeoutException")
    ) TimedOut
    else if (
      named("AWSStatus500Exception") || named("AWSServiceThrottledException") ||
      named("AWSServiceUnavailableException") || text.matches("(?s).*Status Code: 5\\d\\d.*")
    ) ServerError
    else Other
  }

  def message(
      operation: String,
      location: String,
      endpoint: Option[String],
      problem: Problem,
      cause: Throwable
  ): String = {
    val at = endpoint.map(e => s" at $e").getOrElse("")
    val first = Option(cause.getMessage).map(_.linesIterator.nextOption().getOrElse("")).getOrElse("")
    val committed =
      if (operation == "write")
        "Nothing became visible under that name and the committed state is intact: the batch fails and " +
          "runs again when the query restarts."
      else if (operation == "delete")
        "Nothing was lost: clean-up deletes the file on a later run."
      else "Nothing was changed: the committed state is intact."
    s"lineagestore could not $operation $location$at: ${problem.what}. What to do: ${problem.todo}. $committed " +
      s"Cause: ${cause.getClass.getName}: $first"
  }

  /** Wraps `cause` for `operation` on `location`, classifying it. */
  def apply(operation: String, location: String, endpoint: Option[String], cause: Throwable) =
    new BlobStoreAccessException(operation, location, endpoint, classify(cause), cause)
}
