import { execFile } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { IntegrationApiClient } from '../../../shared/api/client.js';
import { AdaptiveRateLimiter } from '../../../shared/api/limiter.js';
import { runExport } from '../../../shared/export/run/local-run.js';
import { SCHEMA_CONTRACTS, type SchemaContract } from '../../../shared/export/tables.js';
import { manifestKey } from '../../../shared/layout.js';
import { silentLog } from '../../../shared/log.js';
import { LocalStorage } from '../../../shared/storage/local.js';
import { exporter, tempDir } from '../../helpers/export.js';
import { type Simulator, type SimulatorOptions, startSimulator } from '../../simulator/index.js';

const run = promisify(execFile);
const DATASET: SimulatorOptions = {
  seed: 11,
  campaigns: 2,
  jobsPerCampaign: 30,
  reportSize: 'tiny',
  unpublishedShare: 0.1,
};

describe('a run under faults', () => {
  let simulator: Simulator | undefined;
  afterEach(async () => {
    await simulator?.close();
    simulator = undefined;
  });

  async function baseline(schemaContract?: SchemaContract): Promise<number> {
    const clean = await startSimulator(DATASET);
    try {
      return (await exporter(clean, await tempDir('clean')).run({ schemaContract })).counts.reports_exported;
    } finally {
      await clean.close();
    }
  }

  // Under both schema contracts: evolve lands what is not the spec's, never a cut body (not JSON).
  it.each(SCHEMA_CONTRACTS)(
    'loses nothing to 5xx answers, resets and truncated bodies (%s)',
    async (contract) => {
      const expected = await baseline(contract);
      simulator = await startSimulator({
        ...DATASET,
        faults: { serverError: 0.08, reset: 0.03, truncate: 0.03 },
      });
      const manifest = await exporter(simulator, await tempDir('faults')).run({ schemaContract: contract });
      expect(manifest.counts.reports_exported).toBe(expected);
      expect(manifest.counts.reports_failed).toBe(0);
      expect(manifest.counts.reports_invalid).toBe(0);
      expect(manifest.requests.retried).toBeGreaterThan(0);
      expect(manifest.requests.by_status.error ?? 0).toBeGreaterThan(0);
      expect(manifest.status).toBe('succeeded');
    },
  );

  it('loses nothing to a 429 storm and keeps its 429s few', async () => {
    const expected = await baseline();
    simulator = await startSimulator({ ...DATASET, rateLimit: { ratePerSecond: 40, burst: 5 } });
    const manifest = await exporter(simulator, await tempDir('storm')).run();
    expect(manifest.counts.reports_exported).toBe(expected);
    expect(manifest.counts.reports_failed).toBe(0);
    expect(manifest.requests.by_status['429'] ?? 0).toBeGreaterThan(0);
  });

  it('stops with a failed manifest naming the error_code when the key is revoked mid-run', async () => {
    simulator = await startSimulator(DATASET);
    const sim = simulator;
    const target = exporter(sim, await tempDir('revoked'));
    const manifest = await target.run({
      onProgress: (event) => {
        if (event.type === 'planned') sim.revokeKey(sim.keys.valid);
      },
    });
    expect(manifest.status).toBe('failed');
    expect(manifest.error?.error_code).toBe('INVALID_API_KEY');
    const c = manifest.counts;
    expect(
      c.reports_exported +
        c.reports_unchanged +
        c.reports_not_ready +
        c.reports_not_found +
        c.reports_invalid +
        c.reports_failed,
    ).toBe(c.jobs);
    const written = await target.deps.storage.get(manifestKey(manifest.dt, manifest.run_id));
    expect(written).toBeDefined();
  });
});

describe('the CLI', () => {
  const cli = async (args: string[], env: Record<string, string | undefined>) => {
    const result = await run('npx', ['tsx', 'functions/cli/export.ts', ...args], {
      env: { ...process.env, INTEGRATION_API_BASE_URL: undefined, INTEGRATION_API_KEY: undefined, ...env },
    }).then(
      (r) => ({ code: 0, ...r }),
      (e: { code: number; stdout: string; stderr: string }) => e,
    );
    return result;
  };

  it('exits non-zero before any request without INTEGRATION_API_KEY', async () => {
    const simulator = await startSimulator(DATASET);
    try {
      const r = await cli(['--out', await tempDir('nokey')], { INTEGRATION_API_BASE_URL: simulator.url });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('INTEGRATION_API_KEY');
      expect(simulator.stats.total).toBe(0);
    } finally {
      await simulator.close();
    }
  });

  it('exits 1 with one line naming the error_code on an expired key, and never prints the key', async () => {
    const simulator = await startSimulator(DATASET);
    try {
      const out = await tempDir('expired');
      const r = await cli(['--out', out, '--date', '2026-01-02'], {
        INTEGRATION_API_BASE_URL: simulator.url,
        INTEGRATION_API_KEY: simulator.keys.expired,
      });
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/^error: .*API_KEY_EXPIRED.*$/m);
      expect(r.stdout + r.stderr).not.toContain(simulator.keys.expired);
    } finally {
      await simulator.close();
    }
  });

  it('exports and prints the summary, exit 0', async () => {
    const simulator = await startSimulator(DATASET);
    try {
      const out = await tempDir('cli');
      const r = await cli(['--out', out, '--date', '2026-01-02'], {
        INTEGRATION_API_BASE_URL: simulator.url,
        INTEGRATION_API_KEY: simulator.keys.valid,
      });
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/status\s+succeeded/);
      const [manifest] = await readdir(join(out, 'runs', 'dt=2026-01-02'));
      expect(manifest).toMatch(/\.json$/);
      expect(r.stdout).toContain(`runs/dt=2026-01-02/${manifest}`);
      expect(r.stdout + r.stderr).not.toContain(simulator.keys.valid);
    } finally {
      await simulator.close();
    }
  });
});

describe('a campaign whose job listing keeps failing', () => {
  it('ends the run partial, naming the campaign, and exports the others', async () => {
    const simulator = await startSimulator(DATASET);
    try {
      const [first, second] = simulator.dataset.campaigns;
      simulator.failNext(new RegExp(`/campaigns/${first!.id}/jobs`), '503', 50);
      const storage = new LocalStorage(await tempDir('unlisted'));
      const limiter = new AdaptiveRateLimiter({ maxRate: 10_000 });
      const manifest = await runExport(
        {
          api: () =>
            new IntegrationApiClient({
              baseUrl: simulator.url,
              apiKey: simulator.keys.valid,
              limiter,
              retry: { maxAttempts: 2, baseDelayMs: 1, maxDelayMs: 5 },
            }),
          storage,
          log: silentLog,
          now: () => new Date(),
        },
        { mode: 'incremental' },
      );
      expect(manifest.status).toBe('partial');
      expect(manifest.unlisted_campaigns).toEqual([first!.id]);
      // The failed listing's requests count too: every request sent is in the manifest.
      expect(manifest.requests.total).toBe(simulator.stats.total);
      expect(manifest.requests.by_status['503']).toBeGreaterThan(0);
      expect(manifest.counts.jobs).toBe(second!.jobs.length);
    } finally {
      await simulator.close();
    }
  });
});
