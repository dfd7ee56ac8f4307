/**
 * The Glue catalog of the Iceberg tables: a table's current metadata file is its Glue table's
 * `metadata_location` parameter, swapped by `UpdateTable` with the `VersionId` read (Glue's
 * optimistic concurrency). As Iceberg's own GlueTableOperations does it, less the lock manager
 * and the table creation: the stack creates the Glue tables (infra/constructs/iceberg-tables.ts).
 */
import {
  GetTableCommand,
  type GlueClient,
  type Table as GlueTable,
  type TableInput,
  UpdateTableCommand,
} from '@aws-sdk/client-glue';
import { ConfigError, ExporterError } from '../errors.js';
import { icebergTablePrefix } from '../layout.js';
import type { Storage } from '../storage/storage.js';
import type { CatalogRef, CatalogTable, CommitResult, IcebergCatalog } from './catalog.js';
import { GLUE_PARAMETERS, ICEBERG_TABLE_TYPE } from './glue-parameters.js';
import { parseJson, stringifyJson } from './json.js';
import type { TableMetadata } from './types.js';

/**
 * Swaps tried after answers lost before the swap applied: the SDK has already retried each one
 * (3 attempts by default), so more than this means Glue is down, not flaky.
 */
const DEFAULT_MAX_ATTEMPTS = 3;

export interface GlueCatalogOptions {
  readonly client: GlueClient;
  /** The Glue database holding the tables. */
  readonly databaseName: string;
  /** Where the metadata files are: `storage.location` is the output root (`s3://bucket/prefix`). */
  readonly storage: Storage;
  /** The Glue table of an exporter table (default: the same name). */
  readonly tableName?: (table: string) => string;
  /** The Data Catalog's id (default: the caller's account). */
  readonly catalogId?: string;
  /** UpdateTable attempts when the answers are lost and the pointer has not moved (default 3). */
  readonly maxAttempts?: number;
  /** A new metadata file's unique part (default `crypto.randomUUID`). */
  readonly uuid?: () => string;
}

/** Glue's answer of a GetTable, kept with the pointer read, for the swap's table input. */
const glueTables = new WeakMap<CatalogTable, GlueTable>();

/**
 * The Glue catalog. A commit writes `metadata/<NNNNN>-<uuid>.metadata.json` (the next version,
 * as Iceberg names them), then swaps the pointer with `UpdateTable` on the `VersionId` of the
 * load; a lost answer is resolved by reading the pointer back.
 *
 * @example
 * const catalog = new GlueCatalog({ client: new GlueClient({}), databaseName: 'reports', storage });
 * const base = await catalog.load('reports');
 * const result = await catalog.commit(base, next(base.metadata));
 */
export class GlueCatalog implements IcebergCatalog {
  readonly kind = 'glue';
  readonly #client: GlueClient;
  readonly #database: string;
  readonly #storage: Storage;
  readonly #tableName: (table: string) => string;
  readonly #catalogId: string | undefined;
  readonly #maxAttempts: number;
  readonly #uuid: () => string;

  constructor(options: GlueCatalogOptions) {
    this.#client = options.client;
    this.#database = options.databaseName;
    this.#storage = options.storage;
    this.#tableName = options.tableName ?? ((t) => t);
    this.#catalogId = options.catalogId;
    this.#maxAttempts = Math.max(1, options.maxAttempts ?? DEFAULT_MAX_ATTEMPTS);
    this.#uuid = options.uuid ?? (() => crypto.randomUUID());
  }

  /** The database, and the region the client sends to (the Lambda's own, the CLI's from the record). */
  async ref(): Promise<CatalogRef> {
    return { kind: 'glue', database: this.#database, region: await this.#client.config.region() };
  }

  /** `<output root>/iceberg/<table>`: the location the stack gives the Glue table. */
  tableLocation(table: string): string {
    return `${this.#storage.location}/${icebergTablePrefix(table)}`;
  }

  async load(table: string): Promise<CatalogTable> {
    const glueTable = await this.#getTable(table);
    // No pointer: a table the stack made before Glue wrote its first metadata, or one whose
    // parameters a stack update reset; the next commit sets it again.
    const metadataLocation = glueTable.Parameters?.[GLUE_PARAMETERS.metadataLocation] || undefined;
    const metadata = metadataLocation === undefined ? undefined : await this.#read(table, metadataLocation);
    const loaded: CatalogTable = {
      name: table,
      metadataLocation,
      metadata,
      version: glueTable.VersionId ?? '',
    };
    glueTables.set(loaded, glueTable);
    return loaded;
  }

  async commit(base: CatalogTable, metadata: TableMetadata): Promise<CommitResult> {
    const glueTable = glueTables.get(base) ?? (await this.#getTable(base.name));
    if ((glueTable.VersionId ?? '') !== base.version) return { committed: false };
    const location = this.#nextMetadataLocation(base, metadata);
    await this.#storage.put(this.#keyOf(base.name, location), stringifyJson(metadata), {
      contentType: 'application/json',
    });
    const update = new UpdateTableCommand({
      CatalogId: this.#catalogId,
      DatabaseName: this.#database,
      TableInput: swappedInput(glueTable, location, base.metadataLocation),
      VersionId: base.version,
      // Glue keeps a copy of the table per update unless told not to, against a quota of
      // versions per table: a pointer swap a day per table would reach it. Iceberg skips too.
      SkipArchive: true,
    });
    let lastError: unknown;
    for (let attempt = 1; attempt <= this.#maxAttempts; attempt += 1) {
      try {
        await this.#client.send(update);
        return { committed: true, metadataLocation: location };
      } catch (error) {
        if (!isConflict(error) && !isUnknownOutcome(error) && !isThrottled(error)) {
          throw new ExporterError(
            `cannot commit the Iceberg table ${this.#describe(base.name)}: ${message(error)}`,
            {
              cause: error,
            },
          );
        }
        lastError = error;
      }
      // The update may have applied (its answer lost, or an SDK retry found its own change as a
      // conflict): the pointer tells.
      const now = await this.#getTable(base.name);
      const pointer = now.Parameters?.[GLUE_PARAMETERS.metadataLocation] || undefined;
      if (pointer === location) return { committed: true, metadataLocation: location };
      if (pointer !== base.metadataLocation || isConflict(lastError)) return { committed: false };
      // Unchanged after a lost answer or a throttle: the update did not apply; send it again.
    }
    throw new ExporterError(
      `cannot tell whether the Iceberg table ${this.#describe(base.name)} took ${location}: ` +
        `${this.#maxAttempts} updates got no answer (or were throttled) and its pointer has not moved`,
      { retryable: true, cause: lastError },
    );
  }

  async #getTable(table: string): Promise<GlueTable> {
    try {
      const answer = await this.#client.send(
        new GetTableCommand({
          CatalogId: this.#catalogId,
          DatabaseName: this.#database,
          Name: this.#tableName(table),
        }),
      );
      if (answer.Table === undefined) throw new Error('GetTable answered no table');
      return answer.Table;
    } catch (error) {
      if ((error as { name?: string }).name === 'EntityNotFoundException') {
        throw new ConfigError(`the Glue table ${this.#describe(table)} does not exist`, {
          hint: 'the stack creates the Iceberg tables when deployed with -c tableFormat=iceberg',
          cause: error,
        });
      }
      throw new ExporterError(`cannot read the Glue table ${this.#describe(table)}: ${message(error)}`, {
        retryable: isUnknownOutcome(error) || isThrottled(error),
        cause: error,
      });
    }
  }

  async #read(table: string, location: string): Promise<TableMetadata> {
    const key = this.#keyOf(table, location);
    const object = await this.#storage.get(key);
    if (object === undefined) {
      throw new ExporterError(
        `the Glue table ${this.#describe(table)} points at ${location}, which does not exist`,
      );
    }
    return parseJson(new TextDecoder().decode(object.body)) as TableMetadata;
  }

  /** The storage key of a location inside the output root. */
  #keyOf(table: string, location: string): string {
    const root = `${this.#storage.location}/`;
    if (!location.startsWith(root)) {
      throw new ConfigError(
        `the Iceberg table ${this.#describe(table)} has metadata at ${location}, outside the output root ${this.#storage.location}`,
        {
          hint: "the Glue table belongs to another output: point the exporter at the table's bucket and prefix",
        },
      );
    }
    return location.slice(root.length);
  }

  /** `<location>/metadata/<NNNNN>-<uuid>.metadata.json`, NNNNN one past the base's. */
  #nextMetadataLocation(base: CatalogTable, metadata: TableMetadata): string {
    const tableLocation = (metadata.location || this.tableLocation(base.name)).replace(/\/+$/, '');
    const version = versionOf(base.metadataLocation) + 1;
    return `${tableLocation}/metadata/${String(version).padStart(5, '0')}-${this.#uuid()}.metadata.json`;
  }

  #describe(table: string): string {
    return `${this.#database}.${this.#tableName(table)}`;
  }
}

/**
 * The version a metadata file's name carries: `00042-<uuid>.metadata.json` (Iceberg's catalogs,
 * Glue, Athena) or `v42.metadata.json` (file catalogs); -1 for none or another name.
 */
export function versionOf(metadataLocation: string | undefined): number {
  const name = metadataLocation?.slice(metadataLocation.lastIndexOf('/') + 1) ?? '';
  const match = /^(\d+)-[^/]*\.metadata\.json$/.exec(name) ?? /^v(\d+)\.metadata\.json$/.exec(name);
  return match === null ? -1 : Number(match[1]);
}

/**
 * The table as read, with the pointer swapped. Everything else is carried over, the storage
 * descriptor included: its columns are the stack's, from the same table definitions as the
 * Iceberg schema (Athena reads the schema from the metadata; the columns are for people and
 * other Glue clients), so the swap never changes what CloudFormation manages.
 */
function swappedInput(table: GlueTable, location: string, previous: string | undefined): TableInput {
  const parameters: Record<string, string> = {
    ...table.Parameters,
    [GLUE_PARAMETERS.tableType]: ICEBERG_TABLE_TYPE,
    [GLUE_PARAMETERS.metadataLocation]: location,
  };
  if (previous !== undefined) parameters[GLUE_PARAMETERS.previousMetadataLocation] = previous;
  return {
    Name: table.Name,
    Description: table.Description,
    Owner: table.Owner,
    Retention: table.Retention,
    StorageDescriptor: table.StorageDescriptor,
    PartitionKeys: table.PartitionKeys,
    TableType: table.TableType,
    Parameters: parameters,
  };
}

const statusOf = (error: unknown): number | undefined =>
  (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;

/** Glue's answer to a stale `VersionId`: another update came first. */
const isConflict = (error: unknown): boolean =>
  (error as { name?: string }).name === 'ConcurrentModificationException';

const isThrottled = (error: unknown): boolean =>
  statusOf(error) === 429 || /Throttl/.test(String((error as { name?: string }).name));

/** No HTTP answer (reset, timeout) or a 5xx: the request may or may not have been applied. */
const isUnknownOutcome = (error: unknown): boolean => {
  const status = statusOf(error);
  return status === undefined || status >= 500;
};

const message = (error: unknown): string => (error instanceof Error ? error.message : String(error));
