package io.lineagestore.format

/** Which store a file belongs to; written into every file so a file copied into the wrong place is caught. */
final case class StoreIdentity(operatorId: Long, partitionId: Int, storeName: String) {
  override def toString: String = s"operator $operatorId, partition $partitionId, store '$storeName'"
}
