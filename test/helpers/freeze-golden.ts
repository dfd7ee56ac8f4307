/**
 * The golden export of the `freeze` contract (issue 27): one deterministic run against the
 * simulator, whose output folder, made at commit 01c7797 (the release before the schema
 * contract), is kept in test/fixtures/freeze-golden/. A freeze run of today's code on the same
 * input must write the same bytes (test/integration/export/freeze-golden.test.ts).
 *
 * Deterministic: the simulator's seed, a clock that never moves (run id, dt, exported_at and
 * every manifest time are the same each run), a seeded `random` (run id suffix, record names,
 * backoff jitter) and one campaign, one unit and one report at a time, so that `random` is
 * drawn in the same order each run. This file must run unchanged at 01c7797 too
 * (test/tools/freeze-golden.ts).
 */
import { readdir, readFile } from 'node:fs/promises';
import { basename, join, relative } from 'node:path';
import { cliDeps } from '../../functions/cli/deps.js';
import { randomHex } from '../../shared/export/run/context.js';
import { type LocalRunOptions, runExport } from '../../shared/export/run/local-run.js';
import type { Manifest } from '../../shared/export/state/manifest.js';
import { avroMetadata, decodeManifest, decodeManifestList } from '../../shared/iceberg/avro.js';
import { silentLog } from '../../shared/log.js';
import { type SimulatorOptions, startSimulator } from '../simulator/index.js';
import { Rng } from '../simulator/prng.js';

/**
 * The input: 3 campaigns of 10 small reports, with every kind of job a freeze run treats
 * apart: invalid bodies (quarantined), not published, survey missing, no sections, a report
 * that answers "try again later" once, and one answering 403.
 */
export const GOLDEN_SIMULATOR: SimulatorOptions = {
  seed: 27,
  campaigns: 3,
  jobsPerCampaign: 10,
  reportSize: 'small',
  unpublishedShare: 0.1,
  surveyMissingJobs: 1,
  noSectionsJobs: 1,
  tryLaterJobs: 2,
  tryLaterAttempts: 1,
  invalidReportJobs: 4,
  forbiddenReportJobs: 1,
};

/** The clock of the golden run: it never moves. */
export const GOLDEN_NOW = new Date('2026-01-02T03:04:05.000Z');
export const GOLDEN_RANDOM_SEED = 2701;

/** The table formats of the fixture, each its own output folder (`<fixture>/<format>/`). */
export const GOLDEN_FORMATS = ['hive', 'iceberg'] as const;
export type GoldenFormat = (typeof GOLDEN_FORMATS)[number];

/** Runs the golden export of `format` into the folder `out` (fresh), with `options` added to the run's. */
export async function goldenExport(
  out: string,
  format: GoldenFormat,
  options: Partial<LocalRunOptions> = {},
): Promise<Manifest> {
  const simulator = await startSimulator(GOLDEN_SIMULATOR);
  try {
    const rng = new Rng(GOLDEN_RANDOM_SEED);
    const deps = {
      ...cliDeps({
        baseUrl: simulator.url,
        apiKey: simulator.keys.valid,
        out,
        concurrency: 1,
        maxRate: 10_000,
        log: silentLog,
      }),
      now: () => new Date(GOLDEN_NOW),
      random: () => rng.next(),
      // Run ids as 01c7797 made them (six random digits; since issue 32 the first three are
      // the start's milliseconds): the same draws, so every later draw is the same too.
      newRunId: (at: Date) =>
        `${at
          .toISOString()
          .replace(/[-:]/g, '')
          .replace(/\.\d{3}Z$/, 'Z')}-${randomHex(rng.next.bind(rng), 6)}`,
    };
    return await runExport(deps, {
      mode: 'full',
      tableFormat: format,
      planConcurrency: 1,
      unitConcurrency: 1,
      fetchConcurrency: 1,
      ...options,
    });
  } finally {
    await simulator.close();
  }
}

/** Every file under `dir`, by its path relative to `dir` (with `/`), sorted. */
export async function filesUnder(dir: string): Promise<Map<string, Buffer>> {
  const files = new Map<string, Buffer>();
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  const paths = entries
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name))
    .sort();
  for (const path of paths) files.set(relative(dir, path).split('\\').join('/'), await readFile(path));
  return files;
}

/** Files an Iceberg run writes as a Hive run does, kept once in the fixture (under `hive/`). */
export const SHARED_WITH_HIVE = /^(raw|quarantine)\//;

/** Where an output's folder is named in its files (Iceberg locations), in the comparable form. */
export const OUT_PLACEHOLDER = '<out>';

/** `snap-<snapshot id>-<sequence>-<digest>.avro`: the digest hashes the content, compared itself. */
const MANIFEST_LIST_NAME = /snap-(\d+)-(\d+)-[0-9a-f]+\.avro/g;

/** Avro values as JSON: longs as strings, bytes as hex. */
const avroJson = (value: unknown): string =>
  JSON.stringify(value, (_key, v: unknown) => {
    if (typeof v === 'bigint') return v.toString();
    if (v && typeof v === 'object' && (v as { type?: unknown }).type === 'Buffer')
      return `0x${Buffer.from((v as { data: number[] }).data).toString('hex')}`;
    return v;
  });

/**
 * The files of the output folder `out` in the form the golden fixture keeps, by path: every
 * file's bytes as written, except what names the folder or the process (README of the fixture):
 * - `state/lock.json`: its `owner` (pid@host) and `owner_started` (the process's start), and the
 *   `written_at` each lock write records since issue 32, an intended addition, left out;
 * - run ids: made as 01c7797 made them (`newRunId` of the deps: six random digits);
 * - `state/table-format.json`: the `catalog` an Iceberg output records since issue 28 (the
 *   file catalog's `{"kind":"file"}`), an intended addition, left out;
 * - Iceberg: the folder's absolute path (`<out>`) in metadata, pointers and manifests; the
 *   `table-uuid` (a hash of that path); the digest in a manifest list's name (a hash of its
 *   content, which is compared); Avro manifests and manifest lists as their decoded header and
 *   records (`<name>.avro.json`), since their bytes hold the paths in deflated blocks, and a
 *   manifest list's `manifest_length` (the byte length of a manifest, which holds the paths).
 */
export async function comparableFiles(out: string): Promise<Map<string, Buffer>> {
  const files = new Map<string, Buffer>();
  // Iceberg locations became file:// URIs after 01c7797 (issue 28: the spec asks for a URI):
  // the folder is `<out>` with or without the scheme, the one intended change of form.
  const unpath = (text: string) =>
    text
      .split(`file://${out}`)
      .join(OUT_PLACEHOLDER)
      .split(out)
      .join(OUT_PLACEHOLDER)
      .replace(MANIFEST_LIST_NAME, 'snap-$1-$2-DIGEST.avro');
  for (const [path, bytes] of await filesUnder(out)) {
    const key = unpath(path);
    if (path === 'state/lock.json') {
      const text = bytes
        .toString('utf8')
        .replace(/"owner":"[^"]*"/, '"owner":"<pid>@<host>"')
        .replace(/"owner_started":"[^"]*"/, '"owner_started":"<process start>"')
        // Since issue 32 each lock write records its instant (the lease is judged on the
        // storage's clock): an intended addition, left out.
        .replace(/,"written_at":"[^"]*"/, '');
      files.set(key, Buffer.from(text));
    } else if (path === 'state/table-format.json') {
      files.set(key, Buffer.from(bytes.toString('utf8').replace(',"catalog":{"kind":"file"}', '')));
    } else if (path.endsWith('.avro')) {
      const list = basename(path).startsWith('snap-');
      const header = await avroMetadata(bytes, list ? 'manifest-list' : 'manifest');
      const records = list ? await decodeManifestList(bytes) : await decodeManifest(bytes);
      const json = unpath(avroJson({ header, records })).replace(
        /"manifest_length":\d+/g,
        '"manifest_length":"<length>"',
      );
      files.set(`${key}.json`, Buffer.from(json));
    } else if (path.startsWith('iceberg/') && !path.endsWith('.parquet')) {
      const text = unpath(bytes.toString('utf8')).replace(
        /"table-uuid" *: *"[0-9a-f-]+"/,
        '"table-uuid": "<uuid of the location>"',
      );
      files.set(key, Buffer.from(text));
    } else if (path.startsWith('state/iceberg/') || path.startsWith('runs/')) {
      files.set(key, Buffer.from(unpath(bytes.toString('utf8'))));
    } else files.set(key, bytes);
  }
  return files;
}
