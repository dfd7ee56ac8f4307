/**
 * The API key in Secrets Manager, through one Lambda container's life: a JSON secret read at
 * the first invocation, a rotation noticed by a 401 (the secret is re-read once), the rotated key
 * kept for the next invocations, and a key refused even after the re-read. The tests run in order.
 */
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { STATE_KEYS } from '../../../../shared/layout.js';
import { METRIC } from '../../../../shared/metrics.js';
import { context, keysUnder, SECRET_ID, startTestbed, type Testbed } from './testbed.js';

type StartRun = (event: unknown, ctx: ReturnType<typeof context>) => Promise<Record<string, unknown>>;

describe('the API key secret in a start-run container', () => {
  const secrets = mockClient(SecretsManagerClient);
  const sqs = mockClient(SQSClient);
  let bed: Testbed;
  let startRun: StartRun;
  let addMetric: ReturnType<typeof vi.spyOn>;
  const logged: string[] = [];

  const unauthorized = () => bed.sim.stats.byStatus['401'] ?? 0;
  const secretReads = () => secrets.commandCalls(GetSecretValueCommand).length;

  beforeAll(async () => {
    bed = await startTestbed({ simulator: { campaigns: 3 }, env: { POWERTOOLS_LOG_LEVEL: 'DEBUG' } });
    // Every log line of the container, to check that no key is ever written.
    for (const level of ['log', 'debug', 'info', 'warn', 'error'] as const) {
      vi.spyOn(console, level).mockImplementation((...args: unknown[]) => {
        logged.push(args.map(String).join(' '));
      });
    }
    secrets
      .on(GetSecretValueCommand)
      .resolves({ SecretString: JSON.stringify({ apiKey: bed.sim.keys.valid }) });
    sqs.on(SendMessageBatchCommand).resolves({ Successful: [], Failed: [] });
    startRun = (await import('../../../../functions/aws/start-run.js')).handler as unknown as StartRun;
    const runtime = await import('../../../../functions/aws/runtime.js');
    addMetric = vi.spyOn(runtime.metrics, 'addMetric');
  });

  afterEach(async () => {
    // Each test starts on an output that no run holds (a started run keeps the lock until finish-run).
    await bed.storage.delete([STATE_KEYS.lock]);
    sqs.resetHistory();
    secrets.resetHistory();
    addMetric.mockClear();
  });

  afterAll(async () => {
    vi.restoreAllMocks();
    secrets.restore();
    sqs.restore();
    await bed?.close();
  });

  it('reads the key from a JSON secret {"apiKey": …} at the first invocation, not when the module loads', async () => {
    expect(secretReads()).toBe(0);

    const result = await startRun({ mode: 'incremental' }, context('start-run'));

    expect(result).toMatchObject({ status: 'started', campaigns: 3 });
    expect(unauthorized()).toBe(0);
    expect(secrets.commandCalls(GetSecretValueCommand).map((c) => c.args[0].input)).toEqual([
      { SecretId: SECRET_ID },
    ]);
    expect(sqs.commandCalls(SendMessageBatchCommand)).toHaveLength(1);
  });

  it('re-reads the secret once on a 401 and goes on with the rotated key', async () => {
    bed.sim.revokeKey(bed.sim.keys.valid);
    // Rotated, and stored as plain text this time. The other company's key verifies; it sees no campaigns.
    secrets.on(GetSecretValueCommand).resolves({ SecretString: bed.sim.keys.other_company });

    const result = await startRun({ mode: 'incremental' }, context('start-run'));

    expect(result).toMatchObject({ status: 'started', campaigns: 0 });
    expect(unauthorized()).toBe(1);
    expect(secrets.commandCalls(GetSecretValueCommand).map((c) => c.args[0].input)).toEqual([
      { SecretId: SECRET_ID },
    ]);
  });

  it('keeps using the rotated key in the next invocation, without another 401', async () => {
    const result = await startRun({}, context('start-run'));

    expect(result).toMatchObject({ status: 'started' });
    expect(unauthorized()).toBe(1);
    expect(secretReads()).toBe(0);
  });

  it('records the run as failed, counts an auth failure and sends nothing when the re-read key is refused too', async () => {
    bed.sim.revokeKey(bed.sim.keys.other_company);

    const result = await startRun({ mode: 'incremental' }, context('start-run'));

    expect(result).toMatchObject({ status: 'failed', error: expect.stringContaining('INVALID_API_KEY') });
    expect(unauthorized()).toBe(2);
    expect(secretReads()).toBe(1);
    expect(addMetric).toHaveBeenCalledWith(METRIC.authFailures, 'Count', 1);
    expect(sqs.commandCalls(SendMessageBatchCommand)).toHaveLength(0);
    // The run stays recorded as failed; finish-run closes it (manifest, RunsFailed, event).
    const keys = (await keysUnder(bed.storage, 'state/runs/')).filter((k) => k.endsWith('/run.json'));
    const records = await Promise.all(
      keys.map(async (key) => JSON.parse(Buffer.from((await bed.storage.get(key))?.body ?? []).toString())),
    );
    expect(records.filter((r) => r.fatal).map((r) => r.fatal)).toEqual([
      expect.objectContaining({ error_code: 'INVALID_API_KEY', status: 401 }),
    ]);
  });

  it('never writes a key into a log line, a message or an object', async () => {
    const keys = [bed.sim.keys.valid, bed.sim.keys.other_company];
    const objects: string[] = [];
    for (const key of await keysUnder(bed.storage, '')) {
      const found = await bed.storage.get(key);
      objects.push(Buffer.from(found?.body ?? []).toString('latin1'));
    }
    expect(logged.length).toBeGreaterThan(0);
    expect(objects.length).toBeGreaterThan(0);
    for (const key of keys) {
      expect(logged.filter((line) => line.includes(key))).toEqual([]);
      expect(objects.filter((body) => body.includes(key))).toEqual([]);
    }
  });
});
