/**
 * Commit races of late closings (issue 32): an older run's committer paused between its look at
 * a table and its swap while a newer run's closing commits the same table. The late closings
 * (scenario.ts, `lateClosings`) bring two runs' closings together, but their finishers commit
 * one table after the other: the newer never lands between the older's load of a table (Glue's
 * GetTable, the file catalog's newest `vN.metadata.json`) or its look for newer runs
 * (`blockedByNewerRuns`) and its swap. A process pause there (GC, a suspended VM, a slow call)
 * is what it takes, and what these features make:
 * - in every late-closing seed, a process pause of 5-60 s (one or two in the seed) at the put
 *   of a table's new metadata by a finisher while another finisher works for a run whose
 *   snapshot that metadata does not hold: with the file catalog, a `_current` table's
 *   `vN.metadata.json` (its swap) by an older run's finisher while a newer run's works. Its look
 *   for newer runs came before (the history tables, then the current ones): a newer run that
 *   commits the table in the pause must make the swap fail (412) and the retry see the newer
 *   run (`newerRunCheck`), or the older run's rows of the jobs the newer exported go back into
 *   the table (14). With Glue, any table and either run: the metadata file a commit writes
 *   after its GetTable, right before its UpdateTable; the other run's UpdateTable in the pause
 *   must make this one's stale (`VersionId`), or it overwrites the other's pointer (9);
 * - in those seeds that have the other engine too, the engine compacts `reports` at the pause
 *   when a newer run's snapshot is there already, or when the newer run's swap of it comes
 *   during the pause (0-120 ms later, as its S3-event changes): the older closing, retried,
 *   must find the newer run's rows in the engine's file of several runs (`filesOfRun`), or it
 *   blocks nothing (14).
 * A pause may come after the faults' horizon: the late closings' stall it belongs to outlasts
 * it, and the two resumed finishers mostly work after it (with faults on, 0 seeds of 600 met).
 * Drawn from a stream of their own: no other draw of a seed moves.
 */
import { parseJson } from '../../shared/iceberg/json.js';
import type { TableMetadata } from '../../shared/iceberg/types.js';
import type { Prng } from './prng.js';
import type { SimS3 } from './s3.js';
import type { Actor, Sim } from './scheduler.js';

/** The pauses a seed draws: at most this many, each this long. */
export interface CommitRaces {
  pausesMs: number[];
}

/**
 * The pauses of a late-closing seed (one or two, 5-60 s each; a pause goes to the first swaps
 * that meet another run's finisher), from a stream of their own; none in the other seeds.
 */
export function drawCommitRaces(rng: Prng, lateClosings: boolean): CommitRaces | undefined {
  if (!lateClosings) return undefined;
  const races = rng.stream('commit races');
  const pausesMs = [races.int(5_000, 60_000), races.int(5_000, 60_000)];
  return { pausesMs: pausesMs.slice(0, races.int(1, 2)) };
}

/** What the commit races of a seed reached, for the vitest file's checks. */
export interface CommitRaceCases {
  /** Pauses placed at a finisher's swap while another run's finisher worked (file catalog: an older run's, of a `_current` table). */
  racePauses: number;
  /** ...of which another run committed the paused table before the pause ended. */
  racesMet: number;
  /** Compactions of `reports` set off by a newer run's swap during a pause. */
  raceCompactions: number;
}

export const noCommitRaceCases = (): CommitRaceCases => ({ racePauses: 0, racesMet: 0, raceCompactions: 0 });

/** A table's new metadata: the file catalog's swap, or the file a Glue commit names. */
const METADATA = /^iceberg\/([^/]+)\/metadata\/(?:v\d+|\d+-[^/]+)\.metadata\.json$/;

/** The runs whose snapshots (summary `run-id`) a metadata file holds, and its current snapshot's. */
function runsOf(body: Uint8Array | undefined): { current: string | undefined; runs: Set<string> } {
  const runs = new Set<string>();
  if (!body) return { current: undefined, runs };
  const metadata = parseJson(Buffer.from(body).toString('utf8')) as TableMetadata;
  let current: string | undefined;
  for (const s of metadata.snapshots ?? []) {
    const run = s.summary['run-id'];
    if (run === undefined) continue;
    runs.add(run);
    if (String(s['snapshot-id']) === String(metadata['current-snapshot-id'])) current = run;
  }
  return { current, runs };
}

/** The run a new metadata file commits (its current snapshot's), and every run it holds. */
function committingRun(body: Uint8Array | undefined): { run: string; runs: Set<string> } | undefined {
  const { current, runs } = runsOf(body);
  return current === undefined ? undefined : { run: current, runs };
}

/** Whether the newest `vN.metadata.json` of a file-catalog table holds a snapshot of a run after `run`. */
function newerIn(s3: SimS3, table: string, run: string): boolean {
  let newest = 0;
  for (const key of s3.keys(`iceberg/${table}/metadata/v`)) {
    const version = /\/v(\d+)\.metadata\.json$/.exec(key)?.[1];
    if (version !== undefined) newest = Math.max(newest, Number(version));
  }
  const { runs } = runsOf(s3.peek(`iceberg/${table}/metadata/v${newest}.metadata.json`));
  return [...runs].some((other) => other > run);
}

interface Pause {
  actor: Actor;
  table: string;
  run: string;
  from: number;
  until: number;
}

export class CommitRacer {
  readonly cases = noCommitRaceCases();
  readonly #pauses: Pause[] = [];
  readonly #left: number[];

  constructor(
    private readonly sim: Sim,
    private readonly s3: SimS3,
    races: CommitRaces,
    /** The seed's catalog is Glue. */
    private readonly glue: boolean,
    /** Sets off the other engine's compaction of a table (absent: no other engine in the seed). */
    private readonly compact: ((table: string) => void) | undefined,
  ) {
    this.#left = [...races.pausesMs];
  }

  /** `SimS3.pauseBefore` for a put: the pause at a finisher's swap that another run's finisher may race, or 0. */
  pauseAt(actor: Actor, command: string, key: string, body: Uint8Array | undefined): number {
    if (command !== 'PutObjectCommand' || actor.kind !== 'finish' || this.#left.length === 0) return 0;
    const table = METADATA.exec(key)?.[1];
    if (!table) return 0;
    const committing = committingRun(body);
    if (!committing) return 0;
    // Another finisher at work for a run whose snapshot the table does not hold yet (with the
    // file catalog, a newer run, and a current table: the swap that follows the look for newer
    // runs; with Glue, any run and any table: two UpdateTables of one loaded version).
    const racing = [...this.sim.live].some((other) => {
      if (other === actor || other.kind !== 'finish') return false;
      const run = other.runFor(undefined);
      if (run === undefined || run === committing.run || committing.runs.has(run)) return false;
      return this.glue || (table.endsWith('_current') && run > committing.run);
    });
    if (!racing) return 0;
    const pause = this.#left.shift()!;
    this.cases.racePauses++;
    this.#pauses.push({ actor, table, run: committing.run, from: this.sim.now, until: this.sim.now + pause });
    this.sim.log(
      actor,
      `process paused ${(pause / 1000).toFixed(0)}s before its swap of ${table} (commit race)`,
    );
    // A newer run's `reports` there already: compacted now (the closing's retry reads it after).
    if (this.compact && newerIn(this.s3, 'reports', committing.run)) {
      this.cases.raceCompactions++;
      this.compact('reports');
    }
    return pause;
  }

  /** An S3 listener: a newer run's swap of `reports` during a pause sets off a compaction of it. */
  written(actor: Actor, key: string, body: Uint8Array | undefined): void {
    if (!this.compact || actor.kind === 'other') return;
    const table = METADATA.exec(key)?.[1];
    if (table !== 'reports') return;
    const now = this.sim.now;
    const committing = committingRun(body);
    const racing = this.#pauses.some(
      (p) => p.actor !== actor && p.from <= now && now < p.until && committing && committing.run > p.run,
    );
    if (!racing) return;
    this.cases.raceCompactions++;
    this.compact(table);
  }

  /** After the seed: the pauses in which another actor wrote the table's metadata of another run's commit. */
  met(s3: SimS3): CommitRaceCases {
    for (const p of this.#pauses) {
      const met = s3.events.some((e) => {
        if (e.actor === p.actor || e.op !== 'put' || !e.result.startsWith('ok')) return false;
        if (e.t < p.from || e.t > p.until || METADATA.exec(e.key)?.[1] !== p.table) return false;
        const committing = committingRun(s3.peek(e.key));
        return committing !== undefined && committing.run !== p.run;
      });
      if (met) this.cases.racesMet++;
    }
    return this.cases;
  }
}
