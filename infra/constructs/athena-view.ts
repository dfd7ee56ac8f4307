import { Token } from 'aws-cdk-lib';
import type * as glue from 'aws-cdk-lib/aws-glue';
import { hiveType, prestoType, type ViewDef } from '../../shared/export/views.js';
import { InfraConfigError } from '../config.js';

/**
 * How Athena stores a view it created (`CREATE VIEW`) in the Glue catalog, so that a view
 * registered by CloudFormation reads the same: a `VIRTUAL_VIEW` table flagged `presto_view`,
 * whose original text wraps the base64 of the Trino view definition (Trino's
 * `ConnectorViewDefinition` JSON: originalSql, catalog, schema, columns with Trino type names).
 * Athena re-analyzes `originalSql` on every query and fails with "view is stale" when the
 * result's columns no longer match `columns`; the tests compare them with the table definitions.
 */
export const PRESTO_VIEW_PREFIX = '/* Presto View: ';
export const PRESTO_VIEW_SUFFIX = ' */';
export const PRESTO_VIEW_EXPANDED_TEXT = '/* Presto View */';
/**
 * The owner Athena records for a view it creates (`CREATE VIEW`); the Hive connector reads a
 * view's owner from its Glue table, and a view without one differs from Athena's own.
 */
export const ATHENA_VIEW_OWNER = 'hadoop';
/** The Glue Data Catalog as Athena names it; unqualified tables in the SQL resolve in `schema`. */
export const ATHENA_CATALOG = 'awsdatacatalog';

/** The view definition Athena (Trino) decodes from `ViewOriginalText`. */
export interface PrestoViewDefinition {
  readonly originalSql: string;
  readonly catalog: string;
  readonly schema: string;
  readonly columns: readonly { readonly name: string; readonly type: string }[];
}

/** `/* Presto View: <base64 of the definition JSON> *\/` */
export function prestoViewText(view: ViewDef, databaseName: string): string {
  // The definition is encoded at synth time: a deploy-time name could not be inside the base64.
  if (Token.isUnresolved(databaseName)) {
    throw new InfraConfigError(
      `view ${view.name}: context "databaseName" must be a plain name known at synth time, not a token`,
    );
  }
  const definition: PrestoViewDefinition = {
    originalSql: view.sql,
    catalog: ATHENA_CATALOG,
    schema: databaseName,
    columns: view.columns.map((c) => ({ name: c.name, type: prestoType(c.type) })),
  };
  const base64 = Buffer.from(JSON.stringify(definition), 'utf8').toString('base64');
  return `${PRESTO_VIEW_PREFIX}${base64}${PRESTO_VIEW_SUFFIX}`;
}

/** The Glue `TableInput` of an Athena view: columns in Hive types, the definition encoded. */
export function athenaViewInput(view: ViewDef, databaseName: string): glue.CfnTable.TableInputProperty {
  return {
    name: view.name,
    description: view.doc,
    tableType: 'VIRTUAL_VIEW',
    owner: ATHENA_VIEW_OWNER,
    parameters: { presto_view: 'true', comment: 'Presto View' },
    partitionKeys: [],
    viewOriginalText: prestoViewText(view, databaseName),
    viewExpandedText: PRESTO_VIEW_EXPANDED_TEXT,
    storageDescriptor: {
      columns: view.columns.map((c) => ({ name: c.name, type: hiveType(c.type), comment: c.doc })),
      serdeInfo: {},
    },
  };
}
