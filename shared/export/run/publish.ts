/**
 * Publishing a run: the files its steps staged become one file per table (and one per raw
 * entity) under the contract's layout, `parquet/<table>/dt=…/<run_id>-0.parquet` and
 * `raw/<entity>/dt=…/<run_id>-0.jsonl.gz`, split only above a size. Parquet files are
 * regrouped (`parquet/regroup.ts`): the staged files' small row groups (one batch of reports
 * each) are decoded and encoded again into large ones, large ones are copied as they are, and
 * one footer lists them. Raw files are gzip members, and a gzip stream of several
 * members is one valid file: their bytes are concatenated. Output is streamed (a multipart
 * upload on S3), so memory per output is a constant, whatever the run's size: staged Parquet
 * files read ahead up to {@link READ_AHEAD_BYTES}, the small row groups being gathered (their
 * encoded bytes, at most one output group's) with one column of them decoded at a time, a few
 * raw files' streams in transit, and the upload's parts in flight (S3: 4 × 8 MiB); two outputs
 * are written at once.
 */
import { ExporterError } from '../../errors.js';
import { icebergDataKey, parquetKey, publishedStem, rawKey } from '../../layout.js';
import { ParquetRegroup, type RegroupOptions } from '../../parquet/regroup.js';
import type { ParquetTable } from '../../parquet/schema.js';
import { readRange, type Storage } from '../../storage/storage.js';
import { parquetTableOf } from '../format/table-buffer.js';
import { type FileEntry, type RunRef, type StagedFile, tableFormatOf } from '../state/records.js';
import { RAW_ENTITIES, type RawEntity, TABLE_NAMES, type TableName } from '../tables.js';
import { mapPool } from './pool.js';

/** Above this many bytes of staged input, a table's data goes on in a further file. */
export const DEFAULT_MAX_FILE_BYTES = 256 * 1024 * 1024;
/** Published files written at once by default (each streams its own inputs); `PublishOptions.concurrency`. */
export const PUBLISH_CONCURRENCY = 2;
/**
 * Bytes of staged Parquet files read ahead of the one being regrouped, per output (at least
 * one file is, whatever its size: a staged file holds one unit's rows of one table). 16 MiB
 * keeps several files in flight on S3 where they are ~20–200 KB, and bounds what a few large
 * ones may hold.
 */
const READ_AHEAD_BYTES = 16 * 1024 * 1024;
/**
 * …and at most this many files, per output: staged files are small (~20–200 KB), so 16 MiB
 * alone let ~800 requests wait per output on S3, each holding its SDK objects, with no gain
 * once the connections are busy. 8 overlap a read's latency (~20 ms on S3) many times over what
 * a regroup consumes.
 */
export const READ_AHEAD_FILES = 8;
/**
 * Raw staged files opened ahead of the one being copied, per output: each holds only what its
 * connection has buffered, not the file, so their number and not their size is what to bound.
 */
const STREAMS_AHEAD = 4;

export interface PublishOptions {
  /**
   * Outputs written at once; default {@link PUBLISH_CONCURRENCY}. Memory is this many outputs'
   * worth; the output's bytes do not depend on it.
   */
  concurrency?: number;
  /** Start a further file once a file's inputs add up to this many bytes; default 256 MB. */
  maxFileBytes?: number;
  /**
   * Called with each published Parquet file's last bytes (its footer, length and magic), for
   * the Iceberg commit's column metrics, which would otherwise cost a read of the file.
   */
  onFooter?: ((key: string, footer: Uint8Array) => void) | undefined;
  /**
   * The Parquet table a table's staged files were written with, which its regrouped row groups
   * are encoded with; default the run's (`parquetTableOf`: the contract's, or its Iceberg
   * flavour with field ids, MICROS timestamps and `dt`).
   */
  tableOf?: (name: TableName) => ParquetTable;
  /** Sizes of the published row groups; defaults in `regroup.ts` (tests lower them). */
  regroup?: RegroupOptions;
}

/** One output file: the staged files it concatenates, in order. */
export interface OutputPlan {
  key: string;
  table_or_entity: TableName | RawEntity;
  format: FileEntry['format'];
  inputs: StagedFile[];
}

/** The groups of staged files, in publishing order: raw entities, then tables. */
export const PUBLISH_GROUPS: readonly { name: TableName | RawEntity; format: FileEntry['format'] }[] = [
  ...RAW_ENTITIES.map((name) => ({ name, format: 'jsonl' as const })),
  ...TABLE_NAMES.map((name) => ({ name, format: 'parquet' as const })),
];

/**
 * Cuts one group's staged files, taken in order, into outputs of at most `maxFileBytes` of
 * input each (an output holds at least one file). Holds one output's list of inputs.
 */
export class OutputCutter {
  private current: StagedFile[] = [];
  private bytes = 0;
  private index = 0;

  constructor(
    private readonly run: RunRef,
    private readonly group: (typeof PUBLISH_GROUPS)[number],
    private readonly maxFileBytes: number,
  ) {}

  /** Adds a staged file; returns the output it completed, if adding it started another. */
  add(input: StagedFile): OutputPlan | undefined {
    const done =
      this.current.length > 0 && this.bytes + input.bytes > this.maxFileBytes ? this.close() : undefined;
    this.current.push(input);
    this.bytes += input.bytes;
    return done;
  }

  /** Completes the output being filled; `undefined` when it is empty. */
  close(): OutputPlan | undefined {
    if (this.current.length === 0) return undefined;
    const { name, format } = this.group;
    const stem = publishedStem(this.run.run_id, this.index++);
    const key =
      format === 'jsonl'
        ? rawKey(name as RawEntity, this.run.dt, stem)
        : tableFormatOf(this.run) === 'iceberg'
          ? icebergDataKey(name, this.run.dt, stem)
          : parquetKey(name as TableName, this.run.dt, stem);
    const plan: OutputPlan = { key, table_or_entity: name, format, inputs: this.current };
    this.current = [];
    this.bytes = 0;
    return plan;
  }
}

/**
 * The files a run publishes, from the files it staged: per table and raw entity, the staged
 * files in key order, cut into consecutive groups of at most `maxFileBytes` (a group holds at
 * least one file). Deterministic: the same staged files always give the same keys and bytes.
 */
export function planPublish(run: RunRef, staged: readonly StagedFile[], maxFileBytes: number): OutputPlan[] {
  const plans: OutputPlan[] = [];
  for (const group of PUBLISH_GROUPS) {
    const cutter = new OutputCutter(run, group, maxFileBytes);
    const inputs = staged
      .filter((f) => f.format === group.format && f.table_or_entity === group.name && f.rows > 0)
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    for (const input of inputs) {
      const done = cutter.add(input);
      if (done) plans.push(done);
    }
    const last = cutter.close();
    if (last) plans.push(last);
  }
  return plans;
}

const missing = (input: StagedFile) =>
  new ExporterError(
    `staged file ${input.key}${input.offset === undefined ? '' : ` (bytes ${input.offset}–${input.offset + input.bytes})`} is missing`,
    { retryable: true },
  );

/**
 * One staged file's bytes: the whole object, or its range of the step's object. A range read
 * short (the object is not the one the record names) is an error, never a file cut short.
 */
async function readStaged(storage: Storage, input: StagedFile): Promise<Uint8Array> {
  if (input.offset === undefined) {
    const found = await storage.get(input.key);
    if (!found) throw missing(input);
    return found.body;
  }
  const body = await readRange(storage, input.key, input.offset, input.offset + input.bytes);
  if (!body || body.byteLength !== input.bytes) throw missing(input);
  return body;
}

/**
 * Reads staged Parquet files whole, in order, up to {@link READ_AHEAD_BYTES} and
 * {@link READ_AHEAD_FILES} of them ahead of the one the writer has (regrouping needs a file's
 * footer before its rows).
 */
async function* readInOrder(storage: Storage, inputs: readonly StagedFile[]): AsyncGenerator<Uint8Array> {
  const read = (input: StagedFile) => readStaged(storage, input);
  const ahead: { body: Promise<Uint8Array>; bytes: number }[] = [];
  let aheadBytes = 0;
  let next = 0;
  const fill = () => {
    while (
      next < inputs.length &&
      (ahead.length === 0 ||
        (ahead.length < READ_AHEAD_FILES && aheadBytes + inputs[next]!.bytes <= READ_AHEAD_BYTES))
    ) {
      const input = inputs[next++]!;
      const body = read(input);
      // Rejections of files read ahead are observed when their turn comes; keep them from going unhandled.
      body.catch(() => undefined);
      ahead.push({ body, bytes: input.bytes });
      aheadBytes += input.bytes;
    }
  };
  fill();
  while (ahead.length > 0) {
    const { body, bytes } = ahead.shift()!;
    const file = await body;
    aheadBytes -= bytes;
    fill();
    yield file;
  }
}

/**
 * Streams staged files' bytes in order, {@link STREAMS_AHEAD} opened ahead of the one being
 * copied so that their requests overlap, none of them held whole. Streams opened and not read
 * (the write failed) are ended, which frees their connections.
 */
async function* streamInOrder(storage: Storage, inputs: readonly StagedFile[]): AsyncGenerator<Uint8Array> {
  // A range of a step's object is one unit's raw lines (tens of KB gzip): read at once.
  const open = (input: StagedFile): Promise<AsyncIterable<Uint8Array>> =>
    input.offset !== undefined
      ? readStaged(storage, input).then(async function* (body) {
          yield body;
        })
      : storage.getStream(input.key).then((found) => {
          if (!found) throw missing(input);
          return found;
        });
  const ahead: Promise<AsyncIterable<Uint8Array>>[] = [];
  let next = 0;
  const fill = () => {
    while (next < inputs.length && ahead.length < STREAMS_AHEAD) {
      const stream = open(inputs[next++]!);
      stream.catch(() => undefined);
      ahead.push(stream);
    }
  };
  try {
    fill();
    while (ahead.length > 0) {
      const stream = await ahead.shift()!;
      fill();
      yield* stream;
    }
  } finally {
    for (const stream of ahead) {
      stream.then((s) => s[Symbol.asyncIterator]().return?.()).catch(() => undefined);
    }
  }
}

async function* parquetBytes(
  storage: Storage,
  inputs: readonly StagedFile[],
  table: ParquetTable,
  options: RegroupOptions | undefined,
): AsyncGenerator<Uint8Array> {
  const regroup = new ParquetRegroup(table, options);
  yield regroup.start();
  for await (const file of readInOrder(storage, inputs)) yield* await regroup.append(file);
  yield* await regroup.finish();
}

/** Passes `chunks` through, handing the last one (a Parquet file's footer) to `take`. */
async function* lastChunkTo(chunks: AsyncIterable<Uint8Array>, take: (last: Uint8Array) => void) {
  let last: Uint8Array | undefined;
  for await (const chunk of chunks) {
    last = chunk;
    yield chunk;
  }
  if (last) take(last);
}

/** A published output: its manifest entry and, for Parquet, its footer (for Iceberg's metrics). */
export interface PublishedOutput {
  file: FileEntry;
  footer: Uint8Array | undefined;
}

/**
 * Writes one output from its staged inputs (streamed: a multipart upload on S3). Writing it again
 * writes the same bytes.
 */
export async function writeOutput(
  storage: Storage,
  run: RunRef,
  plan: OutputPlan,
  options: PublishOptions = {},
): Promise<PublishedOutput> {
  const tableOf = options.tableOf ?? ((name: TableName) => parquetTableOf(run, name));
  let footer: Uint8Array | undefined;
  const chunks =
    plan.format === 'parquet'
      ? lastChunkTo(
          parquetBytes(storage, plan.inputs, tableOf(plan.table_or_entity as TableName), options.regroup),
          (last) => {
            footer = last;
          },
        )
      : streamInOrder(storage, plan.inputs);
  const { bytes } = await storage.putStream(plan.key, chunks);
  if (footer) options.onFooter?.(plan.key, footer);
  const rows = plan.inputs.reduce((n, f) => n + f.rows, 0);
  return {
    file: { key: plan.key, table_or_entity: plan.table_or_entity, format: plan.format, rows, bytes },
    footer,
  };
}

/**
 * Publishes a run's staged files: one output per table and raw entity (more above the split
 * size). Writing the same staged files again writes the same keys with the same bytes, so a
 * publish cut short is simply done again. Returns the published files, as the manifest lists them.
 */
export async function publishRun(
  storage: Storage,
  run: RunRef,
  staged: readonly StagedFile[],
  options: PublishOptions = {},
): Promise<FileEntry[]> {
  const plans = planPublish(run, staged, options.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES);
  return mapPool(
    plans,
    options.concurrency ?? PUBLISH_CONCURRENCY,
    async (plan) => (await writeOutput(storage, run, plan, options)).file,
  );
}
