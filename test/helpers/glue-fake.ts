/**
 * A stateful Glue Data Catalog on aws-sdk-client-mock, for the Iceberg catalog's tests: tables
 * with parameters and a `VersionId` that each UpdateTable moves; an UpdateTable on a stale
 * `VersionId` fails with ConcurrentModificationException, as Glue answers. Faults make an
 * update's answer get lost before or after it applied.
 */
import {
  ConcurrentModificationException,
  EntityNotFoundException,
  GetTableCommand,
  type GlueClient,
  type Table,
  UpdateTableCommand,
  type UpdateTableCommandInput,
} from '@aws-sdk/client-glue';
import type { AwsClientStub } from 'aws-sdk-client-mock';
import { ICEBERG_TABLE_NAMES, type IcebergTableName, icebergSchema } from '../../shared/iceberg/schema.js';
import type { TableMetadata } from '../../shared/iceberg/types.js';
import type { Storage } from '../../shared/storage/storage.js';

/** What happens to the next UpdateTable: its answer is lost before or after it applied. */
export type UpdateFault = 'lost-before' | 'lost-after' | 'throttled';

type GlueStub = AwsClientStub<GlueClient>;

/** An error as the SDK throws when no answer arrived (reset, timeout). */
export const lostAnswer = (): Error =>
  Object.assign(new Error('socket hang up'), { name: 'TimeoutError', $metadata: {} });

export class GlueFake {
  readonly #tables = new Map<string, Table>();
  /** Every UpdateTable received, applied or not. */
  readonly updates: UpdateTableCommandInput[] = [];
  /** Faults for the next updates, in order. */
  readonly faults: UpdateFault[] = [];

  constructor(stub: GlueStub) {
    stub.on(GetTableCommand).callsFake(async (input: { DatabaseName: string; Name: string }) => {
      const table = this.#tables.get(`${input.DatabaseName}.${input.Name}`);
      if (table === undefined)
        throw new EntityNotFoundException({ message: 'Table not found', $metadata: { httpStatusCode: 400 } });
      return { Table: structuredClone(table) };
    });
    stub.on(UpdateTableCommand).callsFake(async (input: UpdateTableCommandInput) => {
      this.updates.push(structuredClone(input));
      const fault = this.faults.shift();
      if (fault === 'lost-before') throw lostAnswer();
      if (fault === 'throttled')
        throw Object.assign(new Error('Rate exceeded'), {
          name: 'ThrottlingException',
          $metadata: { httpStatusCode: 400 },
        });
      const key = `${input.DatabaseName}.${input.TableInput?.Name}`;
      const table = this.#tables.get(key);
      if (table === undefined)
        throw new EntityNotFoundException({ message: 'Table not found', $metadata: { httpStatusCode: 400 } });
      if (input.VersionId !== undefined && input.VersionId !== table.VersionId)
        throw new ConcurrentModificationException({
          message: 'Update table failed due to concurrent modifications.',
          $metadata: { httpStatusCode: 400 },
        });
      const { Name, Description, Owner, StorageDescriptor, PartitionKeys, TableType, Parameters } =
        input.TableInput ?? {};
      this.#tables.set(key, {
        ...table,
        Name,
        Description,
        Owner,
        StorageDescriptor,
        PartitionKeys,
        TableType,
        Parameters,
        VersionId: String(Number(table.VersionId) + 1),
      });
      if (fault === 'lost-after') throw lostAnswer();
      return {};
    });
  }

  /** Creates a table at version 0, as the stack would. */
  create(database: string, table: Omit<Table, 'VersionId' | 'DatabaseName'> & { Name: string }): void {
    this.#tables.set(`${database}.${table.Name}`, {
      ...structuredClone(table),
      DatabaseName: database,
      VersionId: '0',
    });
  }

  /** The table as Glue holds it now. */
  table(database: string, name: string): Table {
    const table = this.#tables.get(`${database}.${name}`);
    if (table === undefined) throw new Error(`no table ${database}.${name}`);
    return structuredClone(table);
  }

  /** Changes parameters behind the catalog's back (another writer, a stack update). */
  setParameters(database: string, name: string, parameters: Record<string, string>): void {
    const table = this.table(database, name);
    this.#tables.set(`${database}.${name}`, {
      ...table,
      Parameters: parameters,
      VersionId: String(Number(table.VersionId) + 1),
    });
  }
}

/**
 * The first metadata Glue writes for a stack's Iceberg table: its own field ids and names (all
 * strings, optional), no partition spec, no snapshot.
 */
export function glueMadeMetadata(
  table: IcebergTableName,
  location: string,
  made: Pick<TableMetadata, 'table-uuid' | 'last-column-id' | 'properties'> = {
    'table-uuid': crypto.randomUUID(),
    'last-column-id': 200,
    properties: {},
  },
): TableMetadata {
  return {
    'format-version': 2,
    'table-uuid': made['table-uuid'],
    location,
    'last-sequence-number': 0,
    'last-updated-ms': 1_700_000_000_000,
    'last-column-id': made['last-column-id'],
    'current-schema-id': 0,
    schemas: [
      {
        type: 'struct',
        'schema-id': 0,
        fields: icebergSchema(table, 'freeze').fields.map((f, i) => ({
          id: 100 + i,
          name: f.name,
          required: false,
          type: 'string',
        })),
      },
    ],
    'default-spec-id': 0,
    'partition-specs': [{ 'spec-id': 0, fields: [] }],
    'last-partition-id': 999,
    'default-sort-order-id': 0,
    'sort-orders': [{ 'order-id': 0, fields: [] }],
    properties: made.properties ?? {},
    'current-snapshot-id': -1,
    snapshots: [],
  };
}

/** Registers Glue's first metadata of `table` (written at `key`) as the stack's Glue table. */
export async function createStackTable(
  fake: GlueFake,
  database: string,
  storage: Storage,
  table: IcebergTableName,
  key: string,
  metadata: TableMetadata,
): Promise<void> {
  await storage.put(key, JSON.stringify(metadata));
  fake.create(database, {
    Name: table,
    TableType: 'EXTERNAL_TABLE',
    Parameters: { table_type: 'ICEBERG', metadata_location: `${storage.location}/${key}` },
    StorageDescriptor: { Location: metadata.location, Columns: [] },
  });
}

/**
 * What deploying the stack with tableFormat=iceberg makes: a Glue table of type Iceberg per
 * exporter table in `database`, and Glue's first metadata file of each under the output's
 * `iceberg/<table>/metadata/`.
 */
export async function createStackTables(fake: GlueFake, database: string, storage: Storage): Promise<void> {
  for (const table of ICEBERG_TABLE_NAMES) {
    const location = `${storage.location}/iceberg/${table}`;
    const key = `iceberg/${table}/metadata/00000-${crypto.randomUUID()}.metadata.json`;
    await createStackTable(fake, database, storage, table, key, glueMadeMetadata(table, location));
  }
}
