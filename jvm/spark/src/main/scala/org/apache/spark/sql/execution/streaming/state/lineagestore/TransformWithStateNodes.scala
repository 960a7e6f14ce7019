package org.apache.spark.sql.execution.streaming.state.lineagestore

import org.apache.spark.sql.catalyst.encoders.ExpressionEncoder
import org.apache.spark.sql.catalyst.expressions.{Attribute, Expression}
import org.apache.spark.sql.catalyst.plans.logical.TransformWithStateInPySpark
import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.python.streaming.TransformWithStateInPySparkExec
import org.apache.spark.sql.execution.streaming.operators.stateful.StatefulOperatorStateInfo
import org.apache.spark.sql.execution.streaming.operators.stateful.transformwithstate.TransformWithStateExec
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.streaming.{OutputMode, StatefulProcessor, TimeMode}
import org.apache.spark.sql.types.StructType

/** Thin shim: Spark 4.3's two transformWithState exec nodes, with the one difference that the provider check
  * (`validateStateStoreProvider`, a lookup in a fixed set of class names) also accepts lineagestore's
  * provider. Everything else is Spark's own code, inherited.
  *
  * The constructors mirror Spark 4.3.0's exactly (Spark's `makeCopy` re-instantiates a node's class by
  * reflection with the node's product elements); `TwsShape` checks at session start that Spark still has that
  * shape before anything here is loaded. Both nodes are case classes in Spark, hence the overrides: without
  * `canEqual`/`equals`, a rule's result compares equal to Spark's node and the tree keeps the old one;
  * without `withNewChildrenInternal`, whole-stage codegen rebuilds Spark's class through `copy`.
  */
class LineageTransformWithStateExec(
    keyDeserializer: Expression,
    valueDeserializer: Expression,
    groupingAttributes: Seq[Attribute],
    dataAttributes: Seq[Attribute],
    statefulProcessor: StatefulProcessor[Any, Any, Any],
    timeMode: TimeMode,
    outputMode: OutputMode,
    keyEncoder: ExpressionEncoder[Any],
    outputObjAttr: Attribute,
    stateInfo: Option[StatefulOperatorStateInfo],
    batchTimestampMs: Option[Long],
    prevBatchTimestampMs: Option[Long],
    eventTimeWatermarkForLateEvents: Option[Long],
    eventTimeWatermarkForEviction: Option[Long],
    child: SparkPlan,
    isStreaming: Boolean,
    isRealTimeMode: Boolean,
    hasInitialState: Boolean,
    initialStateGroupingAttrs: Seq[Attribute],
    initialStateDataAttrs: Seq[Attribute],
    initialStateDeserializer: Expression,
    initialState: SparkPlan
) extends TransformWithStateExec(
      keyDeserializer,
      valueDeserializer,
      groupingAttributes,
      dataAttributes,
      statefulProcessor,
      timeMode,
      outputMode,
      keyEncoder,
      outputObjAttr,
      stateInfo,
      batchTimestampMs,
      prevBatchTimestampMs,
      eventTimeWatermarkForLateEvents,
      eventTimeWatermarkForEviction,
      child,
      isStreaming,
      isRealTimeMode,
      hasInitialState,
      initialStateGroupingAttrs,
      initialStateDataAttrs,
      initialStateDeserializer,
      initialState
    ) {

  override def validateStateStoreProvider(isStreaming: Boolean): Unit =
    if (!LineageTws.isLineageProvider(conf)) super.validateStateStoreProvider(isStreaming)

  override def canEqual(that: Any): Boolean = that.isInstanceOf[LineageTransformWithStateExec]
  override def equals(that: Any): Boolean =
    that.isInstanceOf[LineageTransformWithStateExec] && super.equals(that)
  override def hashCode(): Int = super.hashCode()

  override def withNewChildrenInternal(
      newLeft: SparkPlan,
      newRight: SparkPlan
  ): LineageTransformWithStateExec =
    LineageTransformWithStateExec.of(super.withNewChildrenInternal(newLeft, newRight))
}

object LineageTransformWithStateExec {
  def of(e: TransformWithStateExec): LineageTransformWithStateExec = new LineageTransformWithStateExec(
    e.keyDeserializer,
    e.valueDeserializer,
    e.groupingAttributes,
    e.dataAttributes,
    e.statefulProcessor,
    e.timeMode,
    e.outputMode,
    e.keyEncoder,
    e.outputObjAttr,
    e.stateInfo,
    e.batchTimestampMs,
    e.prevBatchTimestampMs,
    e.eventTimeWatermarkForLateEvents,
    e.eventTimeWatermarkForEviction,
    e.child,
    e.isStreaming,
    e.isRealTimeMode,
    e.hasInitialState,
    e.initialStateGroupingAttrs,
    e.initialStateDataAttrs,
    e.initialStateDeserializer,
    e.initialState
  )
}

/** The Python (`transformWithStateInPandas` / row-based `transformWithState`) node; see above. */
class LineageTransformWithStateInPySparkExec(
    functionExpr: Expression,
    groupingAttributes: Seq[Attribute],
    outputAttrs: Seq[Attribute],
    outputMode: OutputMode,
    timeMode: TimeMode,
    stateInfo: Option[StatefulOperatorStateInfo],
    batchTimestampMs: Option[Long],
    prevBatchTimestampMs: Option[Long],
    eventTimeWatermarkForLateEvents: Option[Long],
    eventTimeWatermarkForEviction: Option[Long],
    userFacingDataType: TransformWithStateInPySpark.UserFacingDataType.Value,
    child: SparkPlan,
    isStreaming: Boolean,
    hasInitialState: Boolean,
    initialState: SparkPlan,
    initialStateGroupingAttrs: Seq[Attribute],
    initialStateSchema: StructType
) extends TransformWithStateInPySparkExec(
      functionExpr,
      groupingAttributes,
      outputAttrs,
      outputMode,
      timeMode,
      stateInfo,
      batchTimestampMs,
      prevBatchTimestampMs,
      eventTimeWatermarkForLateEvents,
      eventTimeWatermarkForEviction,
      userFacingDataType,
      child,
      isStreaming,
      hasInitialState,
      initialState,
      initialStateGroupingAttrs,
      initialStateSchema
    ) {

  override def validateStateStoreProvider(isStreaming: Boolean): Unit =
    if (!LineageTws.isLineageProvider(conf)) super.validateStateStoreProvider(isStreaming)

  override def canEqual(that: Any): Boolean = that.isInstanceOf[LineageTransformWithStateInPySparkExec]
  override def equals(that: Any): Boolean =
    that.isInstanceOf[LineageTransformWithStateInPySparkExec] && super.equals(that)
  override def hashCode(): Int = super.hashCode()

  override def withNewChildrenInternal(
      newLeft: SparkPlan,
      newRight: SparkPlan
  ): LineageTransformWithStateInPySparkExec =
    LineageTransformWithStateInPySparkExec.of(super.withNewChildrenInternal(newLeft, newRight))
}

object LineageTransformWithStateInPySparkExec {
  def of(e: TransformWithStateInPySparkExec): LineageTransformWithStateInPySparkExec =
    new LineageTransformWithStateInPySparkExec(
      e.functionExpr,
      e.groupingAttributes,
      e.outputAttrs,
      e.outputMode,
      e.timeMode,
      e.stateInfo,
      e.batchTimestampMs,
      e.prevBatchTimestampMs,
      e.eventTimeWatermarkForLateEvents,
      e.eventTimeWatermarkForEviction,
      e.userFacingDataType,
      e.child,
      e.isStreaming,
      e.hasInitialState,
      e.initialState,
      e.initialStateGroupingAttrs,
      e.initialStateSchema
    )
}

/** Which plans the extension touches: streaming transformWithState nodes of a query whose provider is
  * lineagestore's. Any other plan is returned as it came, so Spark's own provider and every other operator
  * see no difference.
  */
object LineageTws {

  /** The provider's class name, the one statement of it in Scala (users set it, offset logs record it). A
    * string here because the shim does not see the glue (the glue imports the shim); the glue takes it from
    * here, and TwsSuite checks that it names the real class.
    */
  val ProviderClassName = "io.lineagestore.spark.LineageStateStoreProvider"

  def isLineageProvider(conf: SQLConf): Boolean =
    conf.getConf(SQLConf.STATE_STORE_PROVIDER_CLASS) == ProviderClassName

  def replaceNodes(plan: SparkPlan): SparkPlan =
    if (!isLineageProvider(plan.conf)) plan
    else
      plan.transformUp {
        case e: TransformWithStateExec if e.isStreaming && !e.isInstanceOf[LineageTransformWithStateExec] =>
          LineageTransformWithStateExec.of(e)
        case e: TransformWithStateInPySparkExec
            if e.isStreaming && !e.isInstanceOf[LineageTransformWithStateInPySparkExec] =>
          LineageTransformWithStateInPySparkExec.of(e)
      }
}
