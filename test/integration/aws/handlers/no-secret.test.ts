/**
 * start-run right after `cdk deploy`, before anyone put the key: the secret has no value, or one
 * that holds no key. The invocation fails saying which secret and how to fill it, counts an auth
 * failure (the AuthFailures alarm tells a person), sends nothing, and nothing rejects outside it.
 */
import {
  GetSecretValueCommand,
  ResourceNotFoundException,
  SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import { SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { STATE_KEYS } from '../../../../shared/layout.js';
import { METRIC } from '../../../../shared/metrics.js';
import {
  type ConsoleCapture,
  captureConsole,
  context,
  keysUnder,
  METRICS_ON,
  SECRET_ID,
  startTestbed,
  type Testbed,
} from './testbed.js';

type StartRun = (event: unknown, ctx: ReturnType<typeof context>) => Promise<Record<string, unknown>>;

const FIX = `aws secretsmanager put-secret-value --secret-id ${SECRET_ID} --secret-string file://key.txt`;
/** What GetSecretValue answers for a secret created without a value. */
const NO_VALUE = new ResourceNotFoundException({
  message: "Secrets Manager can't find the specified secret value for staging label: AWSCURRENT",
  $metadata: { httpStatusCode: 400 },
});

describe('start-run before the API key is put', () => {
  const secrets = mockClient(SecretsManagerClient);
  const sqs = mockClient(SQSClient);
  const rejections: unknown[] = [];
  const onRejection = (reason: unknown) => rejections.push(reason);
  let bed: Testbed;
  let output: ConsoleCapture;
  let startRun: StartRun;

  beforeAll(async () => {
    process.on('unhandledRejection', onRejection);
    bed = await startTestbed({ simulator: { campaigns: 2 }, env: METRICS_ON });
    output = captureConsole();
    secrets.on(GetSecretValueCommand).rejects(NO_VALUE);
    sqs.on(SendMessageBatchCommand).resolves({ Successful: [], Failed: [] });
    startRun = (await import('../../../../functions/aws/start-run.js')).handler as unknown as StartRun;
  });

  afterEach(async () => {
    // Anything rejected outside the invocation surfaces within a turn or two of the event loop.
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(rejections).toEqual([]);
    output.clear();
    secrets.resetHistory();
    sqs.resetHistory();
    bed.sim.resetStats();
  });

  afterAll(async () => {
    process.off('unhandledRejection', onRejection);
    vi.restoreAllMocks();
    secrets.restore();
    sqs.restore();
    await bed?.close();
  });

  it('loads the handler without reading the secret', () => {
    expect(secrets.commandCalls(GetSecretValueCommand)).toHaveLength(0);
  });

  it.each([
    ['no value yet (ResourceNotFoundException)', undefined, 'has no value yet'],
    ['an empty string', '', 'has no value yet'],
    ['a blank string', '  \n', 'holds no API key'],
    ['JSON without apiKey', '{"key": "k-0123456789abcdef"}', 'holds no API key'],
  ])(
    'fails the invocation on a secret with %s, naming the secret and the fix',
    async (_what, value, says) => {
      if (value !== undefined) secrets.on(GetSecretValueCommand).resolves({ SecretString: value });

      const failed = startRun(
        { mode: 'incremental', scheduled_time: '2026-11-23T02:00:00Z' },
        context('start-run'),
      );

      await expect(failed).rejects.toThrow(`the secret ${SECRET_ID} ${says}: put the key with \`${FIX}\``);
      await expect(failed).rejects.toMatchObject({ name: 'ConfigError' });
      await expect(failed).rejects.not.toThrow('k-0123456789abcdef');
      expect(secrets.commandCalls(GetSecretValueCommand)).toHaveLength(1);
      expect(output.metrics()[METRIC.authFailures]).toEqual([1]);
      expect(bed.sim.stats.total).toBe(0);
      expect(sqs.commandCalls(SendMessageBatchCommand)).toHaveLength(0);
      // Nothing claimed, locked or recorded: the next delivery of this time starts the run.
      expect(await keysUnder(bed.storage, '')).toEqual([]);
    },
  );

  it('starts the run on the next invocation once the key is put, from a file with its line end', async () => {
    // `--secret-string file://key.txt` keeps the file's last newline.
    secrets.on(GetSecretValueCommand).resolves({ SecretString: `${bed.sim.keys.valid}\n` });

    const result = await startRun(
      { mode: 'incremental', scheduled_time: '2026-11-23T02:00:00Z' },
      context('start-run'),
    );

    expect(result).toMatchObject({ status: 'started', campaigns: 2 });
    expect(output.metrics()[METRIC.authFailures]).toBeUndefined();
    expect(await keysUnder(bed.storage, STATE_KEYS.lock)).toEqual([STATE_KEYS.lock]);
  });
});
