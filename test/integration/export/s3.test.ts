/**
 * The same run written to a folder and to S3 (fauxqs on 127.0.0.1) gives the same objects:
 * the layout is one module, and the storage adapters differ only in transport.
 */
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalStorage } from '../../../shared/storage/local.js';
import { S3Storage } from '../../../shared/storage/s3.js';
import type { Storage } from '../../../shared/storage/storage.js';
import { exporter, tempDir } from '../../helpers/export.js';
import { type LocalAws, startLocalAws } from '../../helpers/fauxqs.js';
import { type Simulator, startSimulator } from '../../simulator/index.js';

async function keysOf(storage: Storage, runId: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const key of storage.list('')) keys.push(key.replace(runId, '<run>'));
  return keys;
}

describe('a run to S3', () => {
  let simulator: Simulator;
  let aws: LocalAws;
  beforeAll(async () => {
    simulator = await startSimulator({ seed: 21, campaigns: 2, jobsPerCampaign: 12, reportSize: 'small' });
    aws = await startLocalAws();
    await aws.createBucket('lake');
  });
  afterAll(async () => {
    await simulator?.close();
    await aws?.close();
  });

  it('writes the same keys, manifest counts and raw lines as a run to a folder', async () => {
    const s3 = new S3Storage({ bucket: 'lake', prefix: 'exports/', client: aws.s3Client() });
    const local = new LocalStorage(await tempDir('s3-twin'));
    const toS3 = await exporter(simulator, 's3://lake/exports/', { storage: s3 }).run({ dt: '2026-11-22' });
    const toFolder = await exporter(simulator, local.location, { storage: local }).run({ dt: '2026-11-22' });

    expect(toS3.counts).toEqual(toFolder.counts);
    expect(await keysOf(s3, toS3.run_id)).toEqual(await keysOf(local, toFolder.run_id));
    const rawKey = (await keysOf(s3, toS3.run_id)).find((k) => k.startsWith('raw/reports/'))!;
    const lines = async (storage: Storage, runId: string) => {
      const object = await storage.get(rawKey.replace('<run>', runId));
      return gunzipSync(object!.body)
        .toString('utf8')
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { job_id: number; campaign_id: number; data: unknown })
        .sort((a, b) => a.job_id - b.job_id) // Reports arrive in any order within a batch.
        .map(({ job_id, campaign_id, data }) => ({ job_id, campaign_id, data }));
    };
    expect(await lines(s3, toS3.run_id)).toEqual(await lines(local, toFolder.run_id));
  });
});
