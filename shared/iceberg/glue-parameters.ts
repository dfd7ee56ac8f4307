/**
 * The Glue table parameters of an Iceberg table (Iceberg's BaseMetastoreTableOperations names):
 * a definition the stack's Glue tables (infra) and the Glue catalog (glue-catalog.ts) share.
 * Athena reads a Glue table as Iceberg when `table_type` is `ICEBERG` and `metadata_location`
 * names its current metadata file.
 */
export const GLUE_PARAMETERS = {
  tableType: 'table_type',
  metadataLocation: 'metadata_location',
  previousMetadataLocation: 'previous_metadata_location',
} as const;

/** `table_type`'s value: Athena and every Iceberg reader tell an Iceberg table by it. */
export const ICEBERG_TABLE_TYPE = 'ICEBERG';
