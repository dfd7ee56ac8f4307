/**
 * An in-memory Glue Data Catalog behind the `GlueClient.send` surface that the real
 * `GlueCatalog` (shared/iceberg/glue-catalog.ts) sends to: GetTable, and UpdateTable with
 * `VersionId` (Glue's optimistic concurrency: an update on a stale `VersionId` fails with
 * ConcurrentModificationException, an applied one moves `VersionId` on). The stack's tables
 * exist from the start (infra/constructs/iceberg-tables.ts), here without a pointer yet (a table
 * the stack made before any metadata was written: the first commit sets it). Every call is a
 * scheduler operation, and while faults are on it may meet:
 * - a crash of the caller before the call or after it applied;
 * - an UpdateTable answer lost after it applied, then the SDK's retry: the same update again,
 *   which meets the `VersionId` its own first attempt moved on: ConcurrentModificationException
 *   for a commit that did apply (the committer must tell its own commit by the pointer);
 * - an answer lost before it applied (a TimeoutError, no status: outcome unknown);
 * - ThrottlingException (after the SDK's retries), not applied.
 * Errors are the SDK's own classes, with `name` and `$metadata` as the SDK's are.
 */
import {
  ConcurrentModificationException,
  EntityNotFoundException,
  type Table,
  ThrottlingException,
} from '@aws-sdk/client-glue';
import { GLUE_PARAMETERS } from '../../shared/iceberg/glue-parameters.js';
import { ICEBERG_TABLE_NAMES } from '../../shared/iceberg/schema.js';
import type { SimS3 } from './s3.js';
import type { Actor, Sim } from './scheduler.js';

/** The Glue database of the simulated stack, and its region. */
export const GLUE_DATABASE = 'sim_reports';
const REGION = 'eu-sim-1';

export interface GlueFaults {
  /** Per call: the caller dies (half before the call, half after it applied). */
  crash: number;
  /** Per UpdateTable: the answer lost after it applied; the SDK sends it again. */
  lostAfter: number;
  /** Per UpdateTable: the answer lost before it applied (TimeoutError). */
  lostBefore: number;
  /** Per call: ThrottlingException. */
  throttled: number;
}

/** What the seed's Glue calls met, for the vitest file's checks. */
export interface GlueCases {
  /** UpdateTables refused for a stale VersionId that another actor's update moved on. */
  staleVersion: number;
  /** UpdateTables applied whose answer was lost (the SDK's retry then met its own change). */
  lostAnswer: number;
  /** ...and answers lost before the update applied. */
  lostBefore: number;
  throttled: number;
  /** Pointer swaps of one table by two actors while both were between their GetTable and UpdateTable. */
  concurrentCommits: number;
}

export const noGlueCases = (): GlueCases => ({
  staleVersion: 0,
  lostAnswer: 0,
  lostBefore: 0,
  throttled: 0,
  concurrentCommits: 0,
});

interface Command {
  constructor: { name: string };
  input: Record<string, unknown>;
}

const sdkError = <T extends Error>(error: T, status?: number): T =>
  Object.assign(error, { $metadata: status === undefined ? {} : { httpStatusCode: status } });

/** The simulated catalog of each bucket (the invariants read a Glue seed's tables at its pointers). */
const catalogs = new WeakMap<SimS3, SimGlue>();

/** The Glue catalog of the seed whose bucket is `s3`, if its tables are in Glue. */
export const glueOf = (s3: SimS3): SimGlue | undefined => catalogs.get(s3);

export class SimGlue {
  readonly tables = new Map<string, Table>();
  /** Every pointer an UpdateTable set, per table, in order: each is a committed metadata file. */
  readonly committed = new Map<string, string[]>();
  readonly cases: GlueCases = noGlueCases();
  /** Per table: the actors that read it and have not updated it since (for `concurrentCommits`). */
  readonly #readers = new Map<string, Map<Actor, string>>();

  constructor(
    private readonly sim: Sim,
    private readonly faults: GlueFaults,
    s3: SimS3,
  ) {
    catalogs.set(s3, this);
    for (const name of ICEBERG_TABLE_NAMES) {
      this.tables.set(name, {
        Name: name,
        DatabaseName: GLUE_DATABASE,
        TableType: 'EXTERNAL_TABLE',
        Parameters: { [GLUE_PARAMETERS.tableType]: 'ICEBERG' },
        StorageDescriptor: { Location: `s3://sim-bucket/iceberg/${name}`, Columns: [] },
        VersionId: '0',
      });
    }
  }

  /** A table's metadata location now (the invariants' entry to its chain). */
  pointer(table: string): string | undefined {
    return this.tables.get(table)?.Parameters?.[GLUE_PARAMETERS.metadataLocation];
  }

  /** A client for one actor: what `GlueCatalog` needs of a GlueClient. */
  clientFor(actor: Actor): unknown {
    return {
      config: { region: async () => REGION },
      send: (command: Command) => this.#send(actor, command),
    };
  }

  #send(actor: Actor, command: Command): Promise<unknown> {
    const name = command.constructor.name;
    const input = command.input;
    const table = String(input.Name ?? (input.TableInput as Table | undefined)?.Name ?? '');
    const faulty = this.sim.faultsOn;
    const rng = this.sim.rng;
    return this.sim.call(actor, rng.int(10, 80), `glue ${name} ${table}`, (control) => {
      if (faulty && actor.canCrash && rng.chance(this.faults.crash / 2)) {
        control.kill(`before glue ${name} ${table}`);
        return undefined;
      }
      if (faulty && rng.chance(this.faults.throttled)) {
        this.cases.throttled++;
        this.sim.log(actor, `glue ${name} ${table} → ThrottlingException`);
        throw sdkError(
          new ThrottlingException({ message: 'Rate exceeded', $metadata: { httpStatusCode: 400 } }),
          400,
        );
      }
      const update = name === 'UpdateTableCommand';
      if (update && faulty && rng.chance(this.faults.lostBefore)) {
        this.cases.lostBefore++;
        this.sim.log(actor, `glue ${name} ${table}: no answer (not applied)`);
        throw sdkError(Object.assign(new Error('socket hang up'), { name: 'TimeoutError' }));
      }
      let result = this.#apply(actor, name, input, table, '');
      if (update && faulty && result.ok && rng.chance(this.faults.lostAfter)) {
        this.cases.lostAnswer++;
        this.sim.log(actor, `glue ${name} ${table}: answer lost, SDK retries`);
        result = this.#apply(actor, name, input, table, ' (SDK retry)');
      }
      if (faulty && actor.canCrash && rng.chance(this.faults.crash / 2)) {
        control.kill(`after glue ${name} ${table}`);
        return undefined;
      }
      if (!result.ok) throw result.error;
      return result.value;
    });
  }

  #apply(
    actor: Actor,
    name: string,
    input: Record<string, unknown>,
    tableName: string,
    retry: string,
  ): { ok: true; value: unknown } | { ok: false; error: Error } {
    const table = this.tables.get(tableName);
    if (table === undefined || input.DatabaseName !== GLUE_DATABASE) {
      return {
        ok: false,
        error: sdkError(
          new EntityNotFoundException({ message: 'Table not found', $metadata: { httpStatusCode: 400 } }),
          400,
        ),
      };
    }
    if (name === 'GetTableCommand') {
      const readers = this.#readers.get(tableName) ?? new Map<Actor, string>();
      readers.set(actor, table.VersionId ?? '');
      this.#readers.set(tableName, readers);
      return { ok: true, value: { Table: structuredClone(table) } };
    }
    if (name !== 'UpdateTableCommand') throw new Error(`the simulated Glue does not implement ${name}`);
    // Without a VersionId Glue applies any update (no optimistic check at all).
    if (input.VersionId !== undefined && input.VersionId !== table.VersionId) {
      if (retry === '') this.cases.staleVersion++;
      this.sim.log(actor, `glue UpdateTable ${tableName} → ConcurrentModificationException${retry}`);
      return {
        ok: false,
        error: sdkError(
          new ConcurrentModificationException({
            message: 'Update table failed due to concurrent modifications.',
            $metadata: { httpStatusCode: 400 },
          }),
          400,
        ),
      };
    }
    const next = structuredClone(input.TableInput as Table);
    const readers = this.#readers.get(tableName);
    // Another actor read this version too and has not updated since: two commits at once.
    if (
      readers &&
      [...readers].some(([other, version]) => other !== actor && other.alive && version === table.VersionId)
    ) {
      this.cases.concurrentCommits++;
    }
    readers?.delete(actor);
    this.tables.set(tableName, {
      ...table,
      ...next,
      DatabaseName: GLUE_DATABASE,
      VersionId: String(Number(table.VersionId) + 1),
    });
    const pointer = next.Parameters?.[GLUE_PARAMETERS.metadataLocation];
    if (pointer !== undefined)
      this.committed.set(tableName, [...(this.committed.get(tableName) ?? []), pointer]);
    this.sim.log(actor, `glue UpdateTable ${tableName} → ${pointer ?? '(no pointer)'} ok${retry}`);
    return { ok: true, value: {} };
  }
}
