/**
 * `npm run bench rescue` (issue 27, point 6): what the `evolve` schema contract costs a unit of
 * export-reports in CPU, against `freeze`, on the same realistic reports, in one process.
 *
 * A unit's work on its report bodies (fetching is I/O, not counted), per contract:
 * - freeze: `JSON.parse` of the body, `ReportResponseSchema.safeParse` (the client's check),
 *   `appendReportRows` of every report that passes into a {@link TableBuffer} of the frozen
 *   tables, then every table encoded. A report that fails the check gets no rows (it would be
 *   quarantined: a storage write, I/O).
 * - evolve: `JSON.parse` of the body, no zod parse, `appendEvolvedReportRows` with a
 *   {@link DriftTally} into a `TableBuffer({dt, schema_contract: 'evolve'})` (the tables with
 *   `_rescued`), the unit's drift merged as export-unit merges it, then every table encoded.
 * Both on clean reports (test/helpers/realistic-reports.ts), then on the same reports with
 * 1 in {@link DRIFT_EVERY} drifted by {@link drift} (kinds an API change brings: an unlisted
 * `job_status`, an `answer_type` the spec does not list, a new field on every question, an
 * integer field sent as a string), the kinds in turn.
 *
 * Left out, the same in both: the client's depth check, `TableBuffer.check`, the raw lines
 * (`raw/`) and their compression; with them the shares below would be smaller.
 *
 * Rounds: {@link WARMUP_ROUNDS} untimed, then {@link ROUNDS} timed; in each round the four
 * variants run in turn (their order rotated), each on every unit. Time is the process's CPU
 * (user + system, GC threads included: what Lambda bills). Figures: ms of CPU per 100 reports
 * (median of rounds), and evolve/freeze as the median of the rounds' ratios (a round's variants
 * see the same load). Targets (issue 27): evolve ≤ freeze + 5% clean, ≤ + 15% with 10% drift.
 *
 * Settings (environment): `RESCUE_UNITS` distinct units of 100 reports (default 30),
 * `RESCUE_ROUNDS` (default 11). Run alone: `npx tsx test/bench/rescue.ts` (same figures).
 */
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { ReportResponseSchema } from '../../shared/api/schemas.js';
import { appendEvolvedReportRows } from '../../shared/export/format/evolve-rows.js';
import { appendReportRows, type RowContext } from '../../shared/export/format/flatten.js';
import { TableBuffer } from '../../shared/export/format/table-buffer.js';
import { DriftTally } from '../../shared/export/schema-drift.js';
import { REPORT_TABLES } from '../../shared/export/tables.js';
import { realisticReports } from '../helpers/realistic-reports.js';

/** Reports per unit, as plan-campaign cuts them. */
const UNIT_REPORTS = 100;
/** One report in this many drifts: 10%. */
const DRIFT_EVERY = 10;
const WARMUP_ROUNDS = 2;
const ROUNDS = 11;
const DT = '2026-11-27';
const CTX: RowContext = { runId: 'bench-run', exportedAt: new Date(`${DT}T03:00:00.000Z`) };

type Json = Record<string, unknown>;
type Contract = 'freeze' | 'evolve';

interface UnitBodies {
  campaignId: number;
  reports: { jobId: number; body: string }[];
}

/** The realistic kinds of drift, one per drifted report, in turn. */
const DRIFTS = ['job_status', 'answer_type', 'new_field', 'int_as_string'] as const;
type DriftKindMade = (typeof DRIFTS)[number];

const objects = (xs: unknown): Json[] =>
  Array.isArray(xs) ? xs.filter((x): x is Json => typeof x === 'object' && x !== null) : [];

/**
 * Changes `data` (a report's `data`, mutated) as an API change would, deterministically:
 * - `job_status`: a status the spec does not list (3);
 * - `answer_type`: every single-choice question answers as `scale`, a type the spec lacks;
 * - `new_field`: every question gains `weight` (a number) and `tags` (an array);
 * - `int_as_string`: every section's `max_score` (an integer) comes as a string.
 */
function drift(data: Json, kind: DriftKindMade): void {
  const sections = objects(data.sections);
  const questions = sections.flatMap((s) => objects(s.questions).filter((q) => q.type === 'question'));
  switch (kind) {
    case 'job_status':
      (data.job as Json).job_status = 3;
      break;
    case 'answer_type':
      for (const q of questions) if (q.answer_type === 'single-choice') q.answer_type = 'scale';
      break;
    case 'new_field':
      questions.forEach((q, i) => {
        q.weight = 1 + (i % 4) / 2;
        q.tags = ['hygiene', `zone-${i % 3}`];
      });
      break;
    case 'int_as_string':
      for (const s of sections) if (typeof s.max_score === 'number') s.max_score = String(s.max_score);
      break;
  }
}

/** `units` units of realistic report bodies (as the API sends them), 1 in `driftEvery` drifted (0: none). */
function makeUnits(units: number, driftEvery: number): UnitBodies[] {
  const gen = realisticReports(20261127);
  const out: UnitBodies[] = [];
  let n = 0;
  for (let u = 0; u < units; u++) {
    const campaignId = 500 + u;
    const reports: UnitBodies['reports'] = [];
    for (let r = 0; r < UNIT_REPORTS; r++, n++) {
      const jobId = 3_000_000_000 + n;
      const data = gen.report(jobId, campaignId) as unknown as Json;
      if (driftEvery > 0 && n % driftEvery === driftEvery - 1) {
        drift(data, DRIFTS[Math.floor(n / driftEvery) % DRIFTS.length]!);
      }
      reports.push({ jobId, body: JSON.stringify({ data }) });
    }
    out.push({ campaignId, reports });
  }
  return out;
}

/** CPU ms of a unit's stages: `JSON.parse`, the zod check, the row builder, the encoder. */
interface Stages {
  parse: number;
  check: number;
  build: number;
  encode: number;
}
const STAGES = ['parse', 'check', 'build', 'encode'] as const;

interface UnitResult extends Stages {
  rows: number;
  bytes: number;
  rejected: number;
  drifted: number;
}

/** CPU milliseconds of the process since `since` (a `process.cpuUsage()`), and a new mark. */
function lap(since: NodeJS.CpuUsage): [number, NodeJS.CpuUsage] {
  const now = process.cpuUsage();
  return [(now.user - since.user + now.system - since.system) / 1000, now];
}

/** One unit's CPU work under `contract`, from the bodies to the encoded tables, timed by stage. */
function unitWork(unit: UnitBodies, contract: Contract): UnitResult {
  const stages: Stages = { parse: 0, check: 0, build: 0, encode: 0 };
  let ms: number;
  let mark = process.cpuUsage();
  const buffer = new TableBuffer({ dt: DT, schema_contract: contract });
  const unitDrift = new DriftTally();
  let rejected = 0;
  let drifted = 0;
  for (const { jobId, body } of unit.reports) {
    const value = JSON.parse(body) as Json;
    [ms, mark] = lap(mark);
    stages.parse += ms;
    const ids = { campaignId: unit.campaignId, jobId };
    if (contract === 'freeze') {
      const parsed = ReportResponseSchema.safeParse(value);
      [ms, mark] = lap(mark);
      stages.check += ms;
      if (!parsed.success) {
        rejected++;
        continue;
      }
      appendReportRows(buffer, parsed.data.data, ids, CTX);
    } else {
      const tally = new DriftTally();
      tally.startReport(jobId);
      appendEvolvedReportRows(buffer, value.data as Json, ids, CTX, tally);
      if (!tally.empty) {
        drifted++;
        unitDrift.merge(tally.entries());
      }
    }
    [ms, mark] = lap(mark);
    stages.build += ms;
  }
  unitDrift.entries();
  let rows = 0;
  let bytes = 0;
  for (const table of REPORT_TABLES) {
    if (buffer.rowCount(table) === 0) continue;
    rows += buffer.rowCount(table);
    bytes += buffer.encode(table).byteLength;
  }
  [ms, mark] = lap(mark);
  stages.encode += ms;
  return { ...stages, rows, bytes, rejected, drifted };
}

function allUnits(units: UnitBodies[], contract: Contract): UnitResult {
  const total: UnitResult = {
    parse: 0,
    check: 0,
    build: 0,
    encode: 0,
    rows: 0,
    bytes: 0,
    rejected: 0,
    drifted: 0,
  };
  for (const unit of units) {
    const r = unitWork(unit, contract);
    for (const key of Object.keys(total) as (keyof UnitResult)[]) total[key] += r[key];
  }
  return total;
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

interface Variant {
  name: string;
  units: UnitBodies[];
  contract: Contract;
}

export async function benchRescue(): Promise<Record<string, number>> {
  const unitCount = Number(process.env.RESCUE_UNITS ?? 30);
  const rounds = Number(process.env.RESCUE_ROUNDS ?? ROUNDS);
  const clean = makeUnits(unitCount, 0);
  const drifted = makeUnits(unitCount, DRIFT_EVERY);
  const variants: Variant[] = [
    { name: 'freeze_clean', units: clean, contract: 'freeze' },
    { name: 'evolve_clean', units: clean, contract: 'evolve' },
    { name: 'freeze_drift10', units: drifted, contract: 'freeze' },
    { name: 'evolve_drift10', units: drifted, contract: 'evolve' },
  ];
  const results = new Map<string, UnitResult>();
  for (let i = 0; i < WARMUP_ROUNDS; i++)
    for (const v of variants) results.set(v.name, allUnits(v.units, v.contract));

  const cpu = new Map<string, number[]>(variants.map((v) => [v.name, []]));
  const wall = new Map<string, number[]>(variants.map((v) => [v.name, []]));
  const stages = new Map<string, Stages[]>(variants.map((v) => [v.name, []]));
  for (let round = 0; round < rounds; round++) {
    for (let k = 0; k < variants.length; k++) {
      const v = variants[(round + k) % variants.length]!;
      const before = process.cpuUsage();
      const t = performance.now();
      stages.get(v.name)!.push(allUnits(v.units, v.contract));
      const used = process.cpuUsage(before);
      wall.get(v.name)!.push(performance.now() - t);
      cpu.get(v.name)!.push((used.user + used.system) / 1000);
    }
  }

  const reports = unitCount * UNIT_REPORTS;
  const per100 = (ms: number) => Number(((ms * UNIT_REPORTS) / reports).toFixed(2));
  const ratio = (a: string, b: string) => {
    const xs = cpu.get(a)!;
    const ys = cpu.get(b)!;
    return Number(median(xs.map((x, i) => x / ys[i]!)).toFixed(3));
  };
  const figures: Record<string, number> = {
    reports_per_variant: reports,
    rounds,
    bodies_kb_per_100: Math.round(
      clean.reduce((n, u) => n + u.reports.reduce((m, r) => m + r.body.length, 0), 0) / 1024 / unitCount,
    ),
  };
  for (const v of variants) {
    figures[`${v.name}_cpu_ms_per_100`] = per100(median(cpu.get(v.name)!));
    figures[`${v.name}_wall_ms_per_100`] = per100(median(wall.get(v.name)!));
  }
  // Where the CPU goes (sums of the stages' laps: a little under the totals above).
  for (const v of variants) {
    for (const stage of STAGES) {
      if (stage === 'check' && v.contract === 'evolve') continue;
      figures[`${v.name}_${stage}_ms_per_100`] = per100(median(stages.get(v.name)!.map((s) => s[stage])));
    }
  }
  // Rescue alone: the evolve row builder's CPU beyond freeze's, as a share of freeze's unit.
  const build = (name: string) => median(stages.get(name)!.map((s) => s.build));
  for (const load of ['clean', 'drift10']) {
    figures[`rescue_build_share_${load}`] = Number(
      ((build(`evolve_${load}`) - build(`freeze_${load}`)) / median(cpu.get(`freeze_${load}`)!)).toFixed(3),
    );
  }
  figures.evolve_vs_freeze_clean = ratio('evolve_clean', 'freeze_clean');
  figures.evolve_vs_freeze_drift10 = ratio('evolve_drift10', 'freeze_drift10');
  figures.evolve_drift10_vs_freeze_clean = ratio('evolve_drift10', 'freeze_clean');
  for (const v of variants) {
    const r = results.get(v.name)!;
    figures[`${v.name}_rows`] = r.rows;
    figures[`${v.name}_kb`] = Math.round(r.bytes / 1024);
    if (v.contract === 'freeze') figures[`${v.name}_rejected`] = r.rejected;
    else figures[`${v.name}_drifted`] = r.drifted;
  }
  return figures;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  console.table(await benchRescue());
}
