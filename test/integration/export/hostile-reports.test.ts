/**
 * Issue 8: no report can crash a run. Whole local runs against a scripted API on 127.0.0.1 that
 * serves one campaign normally and answers each job's report with a hostile body: a run always
 * ends with a manifest, counts every job once, quarantines what it cannot write, keeps every
 * row of what it can, and the next run (which asks for the bad report again) ends too.
 */
import { readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { gunzipSync } from 'node:zlib';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PATH_PREFIX } from '../../../shared/api/base-url.js';
import { IntegrationApiClient } from '../../../shared/api/client.js';
import { MAX_JSON_DEPTH } from '../../../shared/api/json-depth.js';
import { AdaptiveRateLimiter } from '../../../shared/api/limiter.js';
import type { Report } from '../../../shared/api/schemas.js';
import { jsonTextOf } from '../../../shared/export/format/json-text.js';
import type { ExportDeps } from '../../../shared/export/run/context.js';
import { runExport } from '../../../shared/export/run/local-run.js';
import type { Manifest } from '../../../shared/export/state/manifest.js';
import { REPORT_TABLES, type ReportTableName, SCHEMA_CONTRACTS } from '../../../shared/export/tables.js';
import { manifestKey } from '../../../shared/layout.js';
import { silentLog } from '../../../shared/log.js';
import { LocalStorage } from '../../../shared/storage/local.js';
import { type DuckDb, openDuckDb } from '../../helpers/duckdb.js';
import { expectedRowCounts, tempDir } from '../../helpers/export.js';
import { realisticReports } from '../../helpers/realistic-reports.js';
import { listQuestion, reportArb, scalarQuestion, section, textInput } from '../../helpers/reports.js';
import { onePage, scriptedRoute } from '../../helpers/scripted-api.js';
import { errorReply, type Reply, startServer, type TestServer } from '../api/server.js';

/**
 * Peak RSS growth allowed over the property test. At its worst a case has five reports that
 * each hold a 4 Mi-character string (8 MB as a JS string): the test's body, the client's text,
 * the parsed value, the raw line, its gzip input and the Parquet cells make ~6 copies, about
 * 250 MB live at once, besides DuckDB's buffers and V8's slack. Measured: ~200 MiB.
 */
const RSS_PEAK_GROWTH_MIB = 512;
/**
 * Growth allowed of the heap after a full GC, from before the first case to after the last
 * (request logs, compiled code): the leak check. Five huge reports kept reachable would pass
 * it. Measured: ~1 MiB.
 */
const HEAP_GROWTH_MIB = 32;
const KEY = 'hostile-test-key-3b9d1f';
const CAMPAIGN = 7;

// ---- A scripted API: one campaign, its jobs, and a body per job's report ----------------

/** Sends `bytes` as a complete 200 answer: a hostile body, not a broken connection. */
const bytesReply = (bytes: Buffer): Reply => ({
  raw: (response) => {
    response.writeHead(200, { 'content-type': 'application/json', 'content-length': String(bytes.length) });
    response.end(bytes);
  },
});

interface HostileApi {
  server: TestServer;
  /** From now on, the campaign's jobs are the keys of `bodies`, each report answered with its bytes. */
  serve(bodies: ReadonlyMap<number, Buffer>): void;
  /** Report requests for `jobId` so far. */
  reportRequests(jobId: number): number;
}

async function hostileApi(): Promise<HostileApi> {
  let bodies: ReadonlyMap<number, Buffer> = new Map();
  const server = await startServer(
    scriptedRoute({
      campaignIds: [CAMPAIGN],
      jobs: () => onePage([...bodies.keys()].map((id) => ({ id, job_status: 2 }))),
      report: (_campaign, jobId) => {
        const bytes = bodies.get(jobId);
        return bytes ? bytesReply(bytes) : errorReply(404, 'NOT_FOUND', 'Resource not found.');
      },
    }),
  );
  return {
    server,
    serve: (next) => {
      bodies = next;
    },
    reportRequests: (jobId) => server.requests.filter((r) => reportJobOf(r.path) === jobId).length,
  };
}

function reportJobOf(path: string): number | undefined {
  const match = new RegExp(`^${API_PATH_PREFIX}/campaigns/${CAMPAIGN}/jobs/(\\d+)/report$`).exec(path);
  return match ? Number(match[1]) : undefined;
}

/** A run's dependencies: retries kept short (a truncated body is retried), a folder as storage. */
function depsFor(api: HostileApi, out: string): ExportDeps {
  const limiter = new AdaptiveRateLimiter({ initialRate: 1000, maxRate: 1000 });
  return {
    api: () =>
      new IntegrationApiClient({
        baseUrl: api.server.url,
        apiKey: KEY,
        limiter,
        retry: { maxAttempts: 2, baseDelayMs: 1, maxDelayMs: 1 },
      }),
    storage: new LocalStorage(out),
    log: silentLog,
    now: () => new Date(),
  };
}

// ---- What a run left: rows per job, raw lines, quarantine records -----------------------

interface QuarantineRecord {
  body: unknown;
  issues: { path: string; code: string; message: string }[];
}

interface Written {
  /** Rows per report table, per job that has any. */
  rows: Map<number, Partial<Record<ReportTableName, number>>>;
  /** The `data` of each raw report line, by job. */
  raw: Map<number, unknown>;
  quarantined: Map<number, QuarantineRecord>;
}

/** Reads back, with DuckDB for the Parquet files, what `manifest` says the run published. */
async function writtenBy(db: DuckDb, out: string, manifest: Manifest): Promise<Written> {
  const found: Written = { rows: new Map(), raw: new Map(), quarantined: new Map() };
  for (const file of manifest.files) {
    const path = join(out, file.key);
    const table = file.table_or_entity as ReportTableName;
    if (file.key.endsWith('.parquet') && REPORT_TABLES.includes(table)) {
      const counts = await db.all(
        `SELECT job_id, count(*)::INTEGER AS n FROM read_parquet('${path}') GROUP BY job_id`,
      );
      for (const { job_id, n } of counts) {
        const jobId = Number(job_id);
        found.rows.set(jobId, { ...found.rows.get(jobId), [table]: Number(n) });
      }
    } else if (file.key.startsWith('raw/reports/')) {
      const text = gunzipSync(await readFile(path)).toString('utf8');
      for (const line of text.split('\n').filter((l) => l !== '')) {
        const parsed = JSON.parse(line) as { job_id: number; data: unknown };
        found.raw.set(parsed.job_id, parsed.data);
      }
    }
  }
  const dir = join(out, 'quarantine', `dt=${manifest.dt}`, manifest.run_id);
  for (const name of await readdir(dir).catch(() => [])) {
    const jobId = Number(/job-(\d+)\.json$/.exec(name)?.[1]);
    found.quarantined.set(jobId, JSON.parse(await readFile(join(dir, name), 'utf8')) as QuarantineRecord);
  }
  return found;
}

const outcomeSum = ({ counts: c }: Manifest) =>
  c.reports_exported +
  c.reports_unchanged +
  c.reports_not_ready +
  c.reports_not_found +
  c.reports_invalid +
  c.reports_failed;

/** The heap in use after a full GC (Node's documented way to reach `gc` without a command-line flag). */
function heapAfterGc(): number {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
  return process.memoryUsage().heapUsed;
}

/** The same JSON, however deep, compared as text (vitest's deep equality recurses). */
const sameJson = (a: unknown, b: unknown) => expect(jsonTextOf(a)).toBe(jsonTextOf(b));

// ---- Hostile bodies -----------------------------------------------------------------------

/** What a body must come to: `exported or invalid` where the schema decides (a replaced node). */
type Expected = 'exported' | 'invalid' | 'failed' | 'exported or invalid';

interface Body {
  kind: string;
  bytes: Buffer;
  expected: Expected;
}

/** A string value put where hostile text goes, then replaced in the JSON text. */
const MARK = 'hostile-marker-7f3a';
const MARK_TEXT = JSON.stringify(MARK);

const withJob = (report: Report, jobId: number): Report => ({ ...report, job: { ...report.job, id: jobId } });

/** The JSON text of `{data}` with the marker string (a value or a key) replaced by `text`. */
function replaceMark(data: unknown, text: string): string {
  const json = JSON.stringify({ data });
  const at = json.indexOf(MARK_TEXT);
  return json.slice(0, at) + text + json.slice(at + MARK_TEXT.length);
}

/** `levels` nested arrays or objects around a 0, as JSON text (JSON.stringify could not write it). */
const deepText = (levels: number, shape: 'array' | 'object') =>
  shape === 'array'
    ? `${'['.repeat(levels)}0${']'.repeat(levels)}`
    : `${'{"k":'.repeat(levels)}0${'}'.repeat(levels)}`;

/** Levels of containers above a value placed at each spot (the response object is level 1). */
const DEPTH_ABOVE = { extra: 2, threads: 7 } as const;

type Spec =
  | { kind: 'valid'; report: Report }
  | { kind: 'truncated'; report: Report; at: number }
  | {
      kind: 'deep';
      report: Report;
      place: 'body' | 'extra' | 'threads';
      shape: 'array' | 'object';
      levels: number;
    }
  | { kind: 'huge string'; report: Report; place: 'location_name' | 'comment' | 'extra'; mib: number }
  | { kind: 'invalid utf-8'; report: Report; bad: readonly number[]; inString: boolean }
  | { kind: 'lone surrogate'; report: Report; text: string; asKey: boolean }
  | {
      kind: 'prototype key';
      report: Report;
      key: string;
      place: 'root' | 'data' | 'job' | 'section';
      value: unknown;
    }
  | { kind: 'wrong type'; report: Report; node: number; value: unknown };

/** Levels of a deep value: around the limit, past it but still writable, past what JSON.stringify takes. */
const levelsArb = fc.oneof(
  fc.integer({ min: 1, max: MAX_JSON_DEPTH + 10 }),
  fc.constantFrom(MAX_JSON_DEPTH - 7, MAX_JSON_DEPTH - 6, MAX_JSON_DEPTH - 2, MAX_JSON_DEPTH - 1),
  fc.integer({ min: MAX_JSON_DEPTH + 1, max: 2_000 }),
  fc.integer({ min: 2_000, max: 10_000 }),
);

const specArb: fc.Arbitrary<Spec> = fc.oneof(
  fc.record({ kind: fc.constant('valid' as const), report: reportArb }),
  fc.record({
    kind: fc.constant('truncated' as const),
    report: reportArb,
    at: fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
  }),
  {
    // Twice as likely: the depth has the most cases (where, how deep, which container).
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('deep' as const),
      report: reportArb,
      place: fc.constantFrom('body' as const, 'extra' as const, 'threads' as const),
      shape: fc.constantFrom('array' as const, 'object' as const),
      levels: levelsArb,
    }),
  },
  fc.record({
    kind: fc.constant('huge string' as const),
    report: reportArb,
    place: fc.constantFrom('location_name' as const, 'comment' as const, 'extra' as const),
    mib: fc.integer({ min: 1, max: 4 }),
  }),
  fc.record({
    kind: fc.constant('invalid utf-8' as const),
    report: reportArb,
    // A stray byte, a cut 2-byte sequence, an encoded surrogate, past U+10FFFF, an overlong '/'.
    bad: fc.constantFrom([0xff], [0x80], [0xc3], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xc0, 0xaf]),
    inString: fc.boolean(),
  }),
  fc.record({
    kind: fc.constant('lone surrogate' as const),
    report: reportArb,
    text: fc.constantFrom('\ud800', '\udfff', 'a\ud83db', '\udc00\ud800'),
    asKey: fc.boolean(),
  }),
  fc.record({
    kind: fc.constant('prototype key' as const),
    report: reportArb,
    key: fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf'),
    place: fc.constantFrom('root' as const, 'data' as const, 'job' as const, 'section' as const),
    value: fc.jsonValue({ maxDepth: 2 }),
  }),
  fc.record({
    kind: fc.constant('wrong type' as const),
    report: reportArb,
    node: fc.nat(),
    value: fc.jsonValue({ maxDepth: 2 }),
  }),
);

/** The bytes of a spec's report body for job `jobId`, and what the run must make of it. */
function bodyOf(spec: Spec, jobId: number): Body {
  const report = withJob(spec.report, jobId);
  const text = (json: string, expected: Expected): Body => ({
    kind: spec.kind,
    bytes: Buffer.from(json),
    expected,
  });
  switch (spec.kind) {
    case 'valid':
      return text(JSON.stringify({ data: report }), 'exported');
    case 'truncated': {
      const json = JSON.stringify({ data: report });
      return text(json.slice(0, Math.max(1, Math.floor(spec.at * json.length))), 'failed');
    }
    case 'deep': {
      const deep = deepText(spec.levels, spec.shape);
      if (spec.place === 'body') return text(deep, 'invalid');
      const data =
        spec.place === 'extra'
          ? { ...report, extra: MARK }
          : {
              ...report,
              sections: [
                ...report.sections,
                section({ questions: [listQuestion({ threads: { deep: MARK } })] }),
              ],
            };
      const tooDeep = DEPTH_ABOVE[spec.place] + spec.levels > MAX_JSON_DEPTH;
      return text(replaceMark(data, deep), tooDeep ? 'invalid' : 'exported');
    }
    case 'huge string': {
      const chunk = '漢字 Ünïcödé ✓ ';
      const huge = chunk.repeat(Math.ceil((spec.mib * 2 ** 20) / chunk.length));
      const data =
        spec.place === 'location_name'
          ? { ...report, job: { ...report.job, location: { ...report.job.location, location_name: huge } } }
          : spec.place === 'comment'
            ? {
                ...report,
                sections: [...report.sections, section({ questions: [scalarQuestion({ comment: huge })] })],
              }
            : { ...report, extra: huge };
      return text(JSON.stringify({ data }), 'exported');
    }
    case 'invalid utf-8': {
      const data = {
        ...report,
        job: { ...report.job, location: { ...report.job.location, location_name: MARK } },
      };
      // Inside a string the bytes decode to U+FFFD; outside one they break the JSON.
      const [before, after] = replaceMark(data, spec.inString ? '"a\u0000b"' : '\u0000"b"').split('\u0000');
      const bytes = Buffer.concat([Buffer.from(before!), Buffer.from(spec.bad), Buffer.from(after!)]);
      return { kind: spec.kind, bytes, expected: spec.inString ? 'exported' : 'failed' };
    }
    case 'lone surrogate': {
      const location = { ...report.job.location, location_name: spec.text };
      const data = {
        ...report,
        job: { ...report.job, location },
        extra: spec.asKey ? { [spec.text]: 1 } : spec.text,
      };
      return text(JSON.stringify({ data }), 'exported');
    }
    case 'prototype key': {
      // The key goes in as text: in a JS literal `__proto__` would set the prototype instead.
      const member = { [MARK]: spec.value };
      const data =
        spec.place === 'data'
          ? { ...member, ...report }
          : spec.place === 'job'
            ? { ...report, job: { ...member, ...report.job } }
            : spec.place === 'section'
              ? { ...report, sections: [{ ...member, ...section() }, ...report.sections] }
              : report;
      const json =
        spec.place === 'root'
          ? `{${JSON.stringify(spec.key)}:${JSON.stringify(spec.value)},${JSON.stringify({ data }).slice(1)}`
          : replaceMark(data, JSON.stringify(spec.key));
      return text(json, 'exported');
    }
    case 'wrong type':
      return text(
        JSON.stringify(replaceNode({ data: report }, spec.node, spec.value)),
        'exported or invalid',
      );
  }
}

type JsonKind = 'null' | 'boolean' | 'number' | 'string' | 'array' | 'object';
const kindOf = (v: unknown): JsonKind =>
  v === null ? 'null' : Array.isArray(v) ? 'array' : (typeof v as 'boolean' | 'number' | 'string' | 'object');

/**
 * A copy of `root` whose node number `n` (depth first, the root included, modulo their count)
 * is `value`, or, when `value` is of the node's own JSON type, `value` wrapped in an array
 * (or an object, for an array node): always a value of another type.
 */
function replaceNode(root: unknown, n: number, value: unknown): unknown {
  const copy = JSON.parse(JSON.stringify(root)) as unknown;
  const nodes: {
    parent: Record<string, unknown> | unknown[] | undefined;
    key: string | number;
    node: unknown;
  }[] = [];
  const stack: (typeof nodes)[number][] = [{ parent: undefined, key: '', node: copy }];
  while (stack.length > 0) {
    const entry = stack.pop()!;
    nodes.push(entry);
    const { node } = entry;
    if (node !== null && typeof node === 'object') {
      for (const [key, child] of Object.entries(node)) {
        stack.push({
          parent: node as Record<string, unknown>,
          key: Array.isArray(node) ? Number(key) : key,
          node: child,
        });
      }
    }
  }
  const target = nodes[n % nodes.length]!;
  const other =
    kindOf(value) !== kindOf(target.node) ? value : kindOf(value) === 'array' ? { value } : [value];
  if (target.parent === undefined) return other;
  (target.parent as Record<string | number, unknown>)[target.key] = other;
  return copy;
}

// ---- Checks every run must pass -------------------------------------------------------------

/** Asserts what a finished run must hold whatever its bodies were; returns what it wrote. */
async function checkRun(
  db: DuckDb,
  out: string,
  manifest: Manifest,
  bodies: ReadonlyMap<number, Body>,
  fetched: ReadonlySet<number>,
): Promise<Written> {
  const written = await writtenBy(db, out, manifest);
  const { counts } = manifest;
  expect(manifest.status).not.toBe('failed');
  expect(counts.jobs).toBe(bodies.size);
  expect(outcomeSum(manifest)).toBe(counts.jobs);
  expect(written.rows.size).toBe(counts.reports_exported);
  expect(written.raw.size).toBe(counts.reports_exported);
  expect(written.quarantined.size).toBe(counts.reports_invalid);
  for (const [jobId, body] of bodies) {
    if (!fetched.has(jobId)) continue;
    const sent = body.bytes.toString('utf8');
    const exported = written.raw.has(jobId);
    const quarantined = written.quarantined.get(jobId);
    const outcome = exported ? 'exported' : quarantined ? 'invalid' : 'failed';
    expect(`${body.kind}: ${outcome}`).toMatch(
      body.expected === 'exported or invalid' ? /: (exported|invalid)$/ : new RegExp(`: ${body.expected}$`),
    );
    expect(exported && quarantined !== undefined).toBe(false);
    if (exported) {
      // Lossless raw line, and every row of the report, no more.
      const data = (JSON.parse(sent) as { data: unknown }).data;
      sameJson(written.raw.get(jobId), data);
      const expected = expectedRowCounts(data);
      const rows = written.rows.get(jobId) ?? {};
      for (const table of REPORT_TABLES)
        expect(rows[table] ?? 0, `${body.kind}, ${table}`).toBe(expected[table]);
    } else {
      expect(written.rows.has(jobId)).toBe(false);
    }
    if (quarantined) {
      expect(quarantined.issues.length).toBeGreaterThan(0);
      // As received: the text itself, or (for a report refused after it parsed) its JSON text.
      sameJson(JSON.parse(quarantined.body as string), JSON.parse(sent));
    }
  }
  return written;
}

// ---- Tests ------------------------------------------------------------------------------------

describe('a run fed hostile reports', () => {
  let api: HostileApi;
  let db: DuckDb;
  const realistic = realisticReports(8);

  beforeAll(async () => {
    api = await hostileApi();
    db = await openDuckDb();
  });
  afterAll(async () => {
    await api?.server.close();
    await db?.close();
  });

  // Not JSON as the client reads it (too deep): quarantined under both schema contracts.
  it.each(SCHEMA_CONTRACTS)(
    'makes the 5,000-level report of the issue invalid, ends partial with a manifest, and so does the next run (%s)',
    async (schemaContract) => {
      const deep = replaceMark({ ...realistic.report(2, CAMPAIGN), extra: MARK }, deepText(5_000, 'array'));
      const bodies = new Map<number, Body>([
        [
          1,
          {
            kind: 'valid',
            bytes: Buffer.from(JSON.stringify({ data: realistic.report(1, CAMPAIGN) })),
            expected: 'exported',
          },
        ],
        [2, { kind: 'deep', bytes: Buffer.from(deep), expected: 'invalid' }],
        [
          3,
          {
            kind: 'valid',
            bytes: Buffer.from(JSON.stringify({ data: realistic.report(3, CAMPAIGN) })),
            expected: 'exported',
          },
        ],
      ]);
      api.serve(new Map([...bodies].map(([id, body]) => [id, body.bytes])));
      const out = await tempDir('hostile-deep');
      const deps = depsFor(api, out);

      // The API's counts go on from the case before (the same server).
      const asked = [1, 2, 3].map((id) => api.reportRequests(id));
      const first = await runExport(deps, { mode: 'incremental', schemaContract });

      expect(first.status).toBe('partial');
      expect(first.counts).toMatchObject({
        jobs: 3,
        reports_exported: 2,
        reports_invalid: 1,
        reports_failed: 0,
      });
      expect(await deps.storage.get(manifestKey(first.dt, first.run_id))).toBeDefined();
      const written = await checkRun(db, out, first, bodies, new Set([1, 2, 3]));
      expect(written.quarantined.get(2)).toMatchObject({
        body: deep,
        issues: [{ path: '', code: 'too_deep', message: `nested more than ${MAX_JSON_DEPTH} levels deep` }],
      });

      const second = await runExport(deps, { mode: 'incremental', schemaContract });

      expect(second.status).toBe('partial');
      expect(second.counts).toMatchObject({ jobs: 3, reports_unchanged: 2, reports_invalid: 1 });
      expect(await deps.storage.get(manifestKey(second.dt, second.run_id))).toBeDefined();
      expect([1, 2, 3].map((id, i) => api.reportRequests(id) - asked[i]!)).toEqual([1, 2, 1]);
    },
  );

  // Under freeze a value its column refuses quarantines the report; under evolve it lands,
  // the value rescued, and the run succeeds.
  it.each(SCHEMA_CONTRACTS)(
    'keeps none of the rows of a report a column refuses under freeze, every row under evolve, and every row of the others in its unit (%s)',
    async (schemaContract) => {
      const evolve = schemaContract === 'evolve';
      // A text input with a number as `measurement` passes the (loose) schema; the string column refuses it.
      const refused = { ...textInput(), measurement: 5 };
      const bad = realistic.report(2, CAMPAIGN);
      bad.sections.push(
        section({ id: 'last', inputs: [textInput(), refused as ReturnType<typeof textInput>] }),
      );
      const bodies = new Map<number, Body>(
        [1, 2, 3].map((id) => {
          const data = id === 2 ? bad : realistic.report(id, CAMPAIGN);
          return [
            id,
            {
              kind: id === 2 ? 'refused cell' : 'valid',
              bytes: Buffer.from(JSON.stringify({ data })),
              expected: id === 2 && !evolve ? 'invalid' : 'exported',
            },
          ];
        }),
      );
      api.serve(new Map([...bodies].map(([id, body]) => [id, body.bytes])));
      const out = await tempDir('hostile-cell');

      const manifest = await runExport(depsFor(api, out), {
        mode: 'incremental',
        unitSize: 10,
        schemaContract,
      });

      const written = await checkRun(db, out, manifest, bodies, new Set([1, 2, 3]));
      if (evolve) {
        expect(manifest.status).toBe('succeeded');
        expect(manifest.counts).toMatchObject({ reports_exported: 3, reports_invalid: 0 });
        expect([...written.rows.keys()].sort()).toEqual([1, 2, 3]);
        expect(written.quarantined.size).toBe(0);
        // The number its string column refused under freeze, as its JSON text (evolve-rows.ts).
        const inputs = join(out, 'parquet', 'inputs', '*', '*.parquet');
        const [cell] = await db.all(
          `SELECT count(*)::INTEGER AS n FROM read_parquet('${inputs}') WHERE job_id = 2 AND measurement = '5'`,
        );
        expect(cell?.n).toBe(1);
        return;
      }
      expect(manifest.status).toBe('partial');
      expect([...written.rows.keys()].sort()).toEqual([1, 3]);
      expect(written.quarantined.get(2)?.issues).toEqual([
        {
          path: 'data',
          code: 'unwritable',
          message: expect.stringMatching(
            /^row builder: parquet table inputs, column measurement, row \d+: expected a string, got number$/,
          ),
        },
      ]);
    },
  );

  it('ends every run, counts every job once and keeps every valid report whole, whatever the bodies', async () => {
    const started = performance.now();
    const heapBefore = heapAfterGc();
    const rssBefore = process.memoryUsage().rss;
    let rssPeak = rssBefore;
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(specArb, { minLength: 1, maxLength: 5 }),
        fc.nat(1_000),
        async (specs, seed) => {
          // Job 1 is always a valid, realistic report: some rows must come out of every run.
          const bodies = new Map<number, Body>([
            [
              1,
              {
                kind: 'valid',
                bytes: Buffer.from(JSON.stringify({ data: realisticReports(seed).report(1, CAMPAIGN) })),
                expected: 'exported',
              },
            ],
            ...specs.map((spec, i): [number, Body] => [i + 2, bodyOf(spec, i + 2)]),
          ]);
          api.serve(new Map([...bodies].map(([id, body]) => [id, body.bytes])));
          const out = await tempDir('hostile');
          const deps = depsFor(api, out);

          const first = await runExport(deps, { mode: 'incremental' });
          const written = await checkRun(db, out, first, bodies, new Set(bodies.keys()));

          // The next run asks again for every report not exported, and ends as well.
          const second = await runExport(deps, { mode: 'incremental' });
          const again = new Set([...bodies.keys()].filter((id) => !written.raw.has(id)));
          await checkRun(db, out, second, bodies, again);
          expect(second.counts.reports_unchanged).toBe(first.counts.reports_exported);
          expect(second.counts.reports_invalid).toBe(first.counts.reports_invalid);

          rssPeak = Math.max(rssPeak, process.memoryUsage().rss);
          runs += 1;
          // Cases of up to tens of MB each; a failing case's folder stays for a look.
          await rm(out, { recursive: true, force: true });
        },
      ),
      { numRuns: 50 },
    );
    const seconds = (performance.now() - started) / 1000;
    const mib = (bytes: number) => Math.round(bytes / 2 ** 20);
    const [rssGrowth, heapGrowth] = [mib(rssPeak - rssBefore), mib(heapAfterGc() - heapBefore)];
    console.info(
      `hostile reports: ${runs} cases of 2 runs in ${seconds.toFixed(1)} s; RSS peak +${rssGrowth} MiB, heap +${heapGrowth} MiB`,
    );
    expect(rssGrowth).toBeLessThan(RSS_PEAK_GROWTH_MIB);
    expect(heapGrowth).toBeLessThan(HEAP_GROWTH_MIB);
  }, 120_000);
});
