/**
 * The invariants checked after quiescence, by reading the bucket directly (published Parquet
 * with hyparquet, not the project's writer):
 * 1. every run that wrote a run record has a manifest (status failed allowed);
 * 2. published `reports` rows: no (job_id, run_id) twice, every row in the run that published
 *    it, one row per job the manifest counts exported, and every row a version the API served;
 * 3. every job the incremental state calls exported (so "unchanged" next time) has rows in the
 *    run the state names, and that run has a manifest;
 * 5. at most one ExportRunFinished per run; exactly one for a queue-carried run's manifest;
 *    none for a run without a manifest;
 * 6. nothing under parquet/, raw/, runs/ or an Iceberg table's `iceberg/<table>/data/` that no
 *    manifest lists (runs/ keys are manifests; `iceberg/<table>/metadata/` is the catalog's, and
 *    nothing else is under iceberg/), every listed file exists with its size, every manifest
 *    validates and its counts add up. Files another engine wrote there (its compactions: the
 *    requests of the `other` actors) are its own.
 * 13. the output's recorded table format (`state/table-format.json`; without one, the format of
 *    the runs that published) is the format of every run the state names for a job it calls
 *    exported, and that format's runs hold rows of the version listed: after any format switch,
 *    crashed and recovered by a run of either format, no job counted exported is missing from
 *    the recorded format's tables.
 * 9, 10 and 11, for Iceberg tables, are in iceberg-invariants.ts.
 * Invariants 4, 7 and 8 are watched while the seed runs (monitor.ts); the final run must also
 * get the lock (7), which the scenario checks.
 */
import { zstdDecompressSync } from 'node:zlib';
import { parquetReadObjects } from 'hyparquet';
import { fingerprint } from '../../shared/export/state/fingerprint.js';
import { CampaignStateSchema } from '../../shared/export/state/incremental.js';
import { type Manifest, ManifestSchema } from '../../shared/export/state/manifest.js';
import { type TableFormat, tableFormatOf } from '../../shared/export/state/records.js';
import { manifestKey, STATE_KEYS } from '../../shared/layout.js';
import type { Announcer } from './actors.js';
import { jobListItem, type SimApi } from './api.js';
import { checkIcebergInvariants, icebergTables, isCurrentTable } from './iceberg-invariants.js';
import type { Monitor } from './monitor.js';
import type { OthersCommitted } from './other-engine.js';
import type { SimS3 } from './s3.js';

const ZSTD = { ZSTD: (input: Uint8Array) => new Uint8Array(zstdDecompressSync(input)) };

const arrayBuffer = (bytes: Uint8Array): ArrayBuffer =>
  bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;

const text = (bytes: Uint8Array): string => Buffer.from(bytes).toString('utf8');

interface ReportRow {
  job_id: bigint;
  run_id: string;
  report_id: bigint | null;
}

export async function checkInvariants(
  s3: SimS3,
  api: SimApi,
  monitor: Monitor,
  announcer: Announcer,
  others?: OthersCommitted,
): Promise<void> {
  const announcements = announcer.events;
  const violate = monitor.violate.bind(monitor);

  // 6 (and the manifests' own validity): every key under runs/ is a valid manifest.
  const manifests = new Map<string, Manifest>();
  for (const key of s3.keys('runs/')) {
    const parsed = ManifestSchema.safeParse(JSON.parse(text(s3.peek(key)!)));
    if (!parsed.success) {
      violate('6 nothing unlisted', `${key} is not a valid manifest`, []);
      continue;
    }
    const m = parsed.data;
    if (key !== manifestKey(m.dt, m.run_id))
      violate('6 nothing unlisted', `${key} holds the manifest of ${m.run_id}`, [m.run_id]);
    manifests.set(m.run_id, m);
    const c = m.counts;
    const outcomes =
      c.reports_exported +
      c.reports_unchanged +
      c.reports_not_ready +
      c.reports_not_found +
      c.reports_invalid +
      c.reports_failed +
      (c.reports_deferred ?? 0);
    if (outcomes !== c.jobs) {
      violate('6 nothing unlisted', `manifest of ${m.run_id}: ${c.jobs} jobs but ${outcomes} outcomes`, [
        m.run_id,
      ]);
    }
  }

  // 6: every published file is listed, every listed file is there.
  const listed = new Map<string, { run: string; bytes: number }>();
  for (const m of manifests.values()) {
    for (const f of m.files) {
      listed.set(f.key, { run: m.run_id, bytes: f.bytes });
      const body = s3.peek(f.key);
      if (!body)
        violate('6 nothing unlisted', `${f.key}, listed by the manifest of ${m.run_id}, is missing`, [
          m.run_id,
        ]);
      else if (body.byteLength !== f.bytes) {
        violate('6 nothing unlisted', `${f.key} has ${body.byteLength} bytes, its manifest says ${f.bytes}`, [
          m.run_id,
        ]);
      }
    }
  }
  for (const key of [...s3.keys('parquet/'), ...s3.keys('raw/')]) {
    if (!listed.has(key)) violate('6 nothing unlisted', `${key} is listed by no manifest`, runsIn(key));
  }
  const iceberg = icebergTables(s3);
  for (const key of iceberg.stray) {
    violate(
      '6 nothing unlisted',
      `${key} is under iceberg/ but in no table's data/ or metadata/`,
      runsIn(key),
    );
  }
  // Current tables' data files are not a run's `files` (iceberg-invariants.ts).
  const othersFiles = new Set(
    s3.events.filter((e) => e.actor.kind === 'other' && e.op === 'put').map((e) => e.key),
  );
  for (const table of iceberg.tables.filter((t) => !isCurrentTable(t))) {
    for (const key of s3.keys(`iceberg/${table}/data/`)) {
      if (!listed.has(key) && !othersFiles.has(key))
        violate('6 nothing unlisted', `${key} is listed by no manifest`, runsIn(key));
    }
  }

  // 9, 10, 11: the Iceberg tables.
  await checkIcebergInvariants(s3, manifests, violate, others);

  // 1: every run that recorded its start has a manifest.
  for (const run of monitor.started.keys()) {
    if (!manifests.has(run)) {
      const left = s3.keys(STATE_KEYS.runPrefix(run));
      violate(
        '1 every run closes',
        `run ${run} recorded its start but has no manifest (left in state/runs: ${left.length} keys${left.includes(STATE_KEYS.closing(run)) ? ', closing.json among them' : ''})`,
        [run],
      );
    }
  }

  // 2: the published reports rows.
  const served = new Set(api.served.map((s) => `${s.jobId}:${s.version}`));
  const rowsOf = new Map<string, Set<number>>();
  const versionsOf = new Map<number, number[]>();
  /** The versions of each job with rows in runs of each format (13). */
  const versionsIn = { hive: new Map<number, number[]>(), iceberg: new Map<number, number[]>() };
  const seen = new Map<string, string>();
  for (const m of manifests.values()) {
    const jobs = new Set<number>();
    rowsOf.set(m.run_id, jobs);
    for (const f of m.files) {
      if (f.format !== 'parquet' || f.table_or_entity !== 'reports') continue;
      const body = s3.peek(f.key);
      if (!body) continue;
      const rows = (await parquetReadObjects({
        file: arrayBuffer(body),
        columns: ['job_id', 'run_id', 'report_id'],
        compressors: ZSTD,
      })) as unknown as ReportRow[];
      for (const row of rows) {
        const job = Number(row.job_id);
        const pair = `${job}/${row.run_id}`;
        if (row.run_id !== m.run_id) {
          violate(
            '2 rows in exactly one run',
            `${f.key} (run ${m.run_id}) holds a row of run ${row.run_id}`,
            [m.run_id],
          );
        }
        if (seen.has(pair)) {
          violate(
            '2 rows in exactly one run',
            `job ${job} has rows twice in run ${row.run_id} (${seen.get(pair)} and ${f.key})`,
            [row.run_id],
          );
        }
        seen.set(pair, f.key);
        if (!served.has(`${job}:${Number(row.report_id)}`)) {
          violate(
            '2 rows in exactly one run',
            `job ${job} version ${row.report_id} in ${f.key} was never served`,
            [m.run_id],
          );
        }
        jobs.add(job);
        const versions = versionsOf.get(job) ?? [];
        versions.push(Number(row.report_id));
        versionsOf.set(job, versions);
        const inFormat = versionsIn[tableFormatOf(m)];
        inFormat.set(job, [...(inFormat.get(job) ?? []), Number(row.report_id)]);
      }
    }
    if (m.status !== 'failed' && jobs.size !== m.counts.reports_exported) {
      violate(
        '2 rows in exactly one run',
        `run ${m.run_id} counts ${m.counts.reports_exported} reports exported but published rows of ${jobs.size} jobs`,
        [m.run_id],
      );
    }
  }

  // 3: no job is "unchanged" next time without published rows. The state names the latest run
  // that saw the job (one that found it unchanged too), and the fingerprint of its list item,
  // which says which version it was listed at: some published run must hold rows of that
  // version or a later one.
  const versionOfFp = new Map<string, number>();
  for (const campaign of api.dataset.campaigns) {
    for (const job of campaign.jobs) {
      for (const { v } of job.versions)
        versionOfFp.set(`${job.id}:${fingerprint(jobListItem(job.id, v))}`, v);
    }
  }
  // 13: the recorded format (or the published runs' one, while none is recorded).
  const recordBody = s3.peek(STATE_KEYS.tableFormat);
  const published = [...manifests.values()].filter((m) => m.status !== 'failed');
  const recorded: TableFormat | undefined = recordBody
    ? (JSON.parse(text(recordBody)) as { table_format: TableFormat }).table_format
    : published.length > 0
      ? tableFormatOf(published[0]!)
      : undefined;
  for (const key of s3.keys('state/campaigns/')) {
    const state = CampaignStateSchema.parse(JSON.parse(text(s3.peek(key)!)));
    for (const [jobId, entry] of Object.entries(state.jobs)) {
      if (entry.outcome !== 'exported') continue;
      const named = manifests.get(entry.run_id);
      if (named && recorded !== undefined) {
        const listedAt = versionOfFp.get(`${jobId}:${entry.fp}`);
        const versions = versionsIn[recorded].get(Number(jobId)) ?? [];
        if (
          tableFormatOf(named) !== recorded ||
          !versions.some((v) => listedAt === undefined || v >= listedAt)
        ) {
          violate(
            '13 the recorded format holds every exported job',
            `${key}: job ${jobId} exported as of run ${entry.run_id} (${tableFormatOf(named)}), but the output records ${recorded} and its tables hold ${versions.length > 0 ? `versions ${versions.join(', ')} only` : 'no row of it'} (listed at version ${listedAt})`,
            [entry.run_id],
          );
        }
      }
      if (!manifests.has(entry.run_id)) {
        violate(
          '3 no unchanged without rows',
          `${key}: job ${jobId} exported as of run ${entry.run_id}, which has no manifest`,
          [entry.run_id],
        );
        continue;
      }
      const listedAt = versionOfFp.get(`${jobId}:${entry.fp}`);
      const versions = versionsOf.get(Number(jobId)) ?? [];
      if (!versions.some((v) => listedAt === undefined || v >= listedAt)) {
        violate(
          '3 no unchanged without rows',
          `${key}: job ${jobId} exported as of run ${entry.run_id} (listed at version ${listedAt}), but no published run has rows of that version (published versions: ${versions.join(', ') || 'none'})`,
          [entry.run_id],
        );
      }
    }
  }

  // 5: one ExportRunFinished per run; a repeat only in the announcement's one window.
  for (const [run, n] of announcements) {
    const excused = repeatsInWindow(s3, announcer, monitor, run);
    monitor.excuses.repeatedAnnouncement += excused;
    if (n - excused > 1)
      violate(
        '5 one announcement',
        `run ${run} was announced ${n} times (${excused} repeat(s) after an announcer that crashed or whose records failed): ${(announcer.announcers.get(run) ?? []).map((a) => `${a.actor.name} (${a.actor.result})`).join(', ')}`,
        [run],
      );
    if (!manifests.has(run))
      violate('5 one announcement', `run ${run} was announced but has no manifest`, [run]);
  }
  for (const m of manifests.values()) {
    if (monitor.started.get(m.run_id) === 'queues' && !announcements.has(m.run_id)) {
      violate(
        '5 one announcement',
        `queue-carried run ${m.run_id} has a manifest (${m.status}${m.recovered_by ? `, recovered by ${m.recovered_by}` : ''}) but no ExportRunFinished`,
        [m.run_id],
      );
    }
  }
}

/**
 * Announcements of `run` made again in the one window shared/export/state/announcement.ts
 * leaves (at least once): the announcer before had its event accepted and never said so (neither
 * the claim's done mark nor the tombstone written), as it crashed, or its done mark and then its
 * tombstone met a fault (503, 409); and it had ended when the next one came. An announcer that ended
 * on any other error, or was still at work, earns nothing.
 */
function repeatsInWindow(s3: SimS3, announcer: Announcer, monitor: Monitor, run: string): number {
  const made = announcer.announcers.get(run) ?? [];
  const claim = STATE_KEYS.announced(run);
  return made.slice(0, -1).filter(({ actor, t }, i) => {
    if (monitor.settledAnnouncement(actor, run)) return false;
    if (actor.endedAt === undefined || actor.endedAt > made[i + 1]!.t) return false;
    if (actor.result === 'crashed') return true;
    // A done mark that failed is no excuse by itself: the announcer goes on to the tombstone,
    // which keeps the others from announcing the run again; only a tombstone that failed too
    // (a call on it that met a fault) leaves the window open.
    const tombstone = STATE_KEYS.closed(run);
    const failedOn = (key: string) =>
      s3.events.some(
        (e) =>
          e.actor === actor &&
          e.key === key &&
          e.t >= t &&
          !e.result.startsWith('ok') &&
          !e.result.startsWith('404') &&
          !e.result.startsWith('412'),
      );
    return failedOn(claim) && failedOn(tombstone);
  }).length;
}

/** Run ids a data key names (for the trace). */
function runsIn(key: string): string[] {
  const match = /(\d{8}T\d{6}Z-[0-9a-f]{6})/.exec(key);
  return match ? [match[1]!] : [];
}
