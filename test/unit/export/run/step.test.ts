/**
 * runStep, the control around a step that the SQS handlers and the local run share: a run that
 * has finished takes no more work, and a step that fails before its record leaves its requests
 * for the manifest. The client is the real one, against a local server.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IntegrationApiClient } from '../../../../shared/api/client.js';
import { ExporterError } from '../../../../shared/errors.js';
import type { ExportDeps } from '../../../../shared/export/run/context.js';
import { readRunRecords } from '../../../../shared/export/run/run-records.js';
import { runStep } from '../../../../shared/export/run/step.js';
import { encodeRecord, type RequestCounts } from '../../../../shared/export/state/records.js';
import { STATE_KEYS } from '../../../../shared/layout.js';
import { silentLog } from '../../../../shared/log.js';
import { LocalStorage } from '../../../../shared/storage/local.js';
import { tempDir } from '../../../helpers/export.js';
import { runRecord, TEST_RUN_ID } from '../../../helpers/records.js';
import { startServer, type TestServer } from '../../../integration/api/server.js';
import { verifyAnswer } from '../../api/fixtures.js';

describe('runStep', () => {
  let server: TestServer;
  let deps: ExportDeps;

  beforeAll(async () => {
    server = await startServer(() => ({ body: verifyAnswer() }));
    const storage = new LocalStorage(await tempDir('step'));
    await storage.put(STATE_KEYS.runRecord(TEST_RUN_ID), encodeRecord(runRecord()));
    deps = {
      api: () => new IntegrationApiClient({ baseUrl: server.url, apiKey: 'step-key' }),
      storage,
      log: silentLog,
      now: () => new Date(),
    };
  });

  afterAll(async () => {
    await server?.close();
  });

  /** A step that sends `n` requests, then fails. */
  const failingAfter = (n: number) => async (d: ExportDeps) => {
    const api = d.api();
    for (let i = 0; i < n; i++) await api.verify();
    throw new ExporterError('the step failed before its record', { retryable: true });
  };

  it('runs the step of an open run and gives its value', async () => {
    const result = await runStep(deps, TEST_RUN_ID, async (d) => (await d.api().verify()).companyName);

    expect(result).toEqual({ ran: true, value: 'Acme Retail' });
  });

  it('drops the step of a run that has no record (finished), before it sends anything', async () => {
    const before = server.requests.length;

    const result = await runStep(deps, '20261122T031500Z-ffffff', failingAfter(1));

    expect(result).toEqual({ ran: false });
    expect(server.requests.length).toBe(before);
  });

  it("keeps a failed step's requests in the run's state, and rethrows its error", async () => {
    await expect(runStep(deps, TEST_RUN_ID, failingAfter(2))).rejects.toThrow('failed before its record');

    const records = await readRunRecords(deps, TEST_RUN_ID);
    expect(records?.unrecorded).toMatchObject({ total: 2, by_status: { '200': 2 } });
  });

  it('hands the requests to keepRequests, and runs without the gate, when the caller owns the run', async () => {
    const kept: RequestCounts[] = [];

    const failed = runStep(deps, '20261122T031500Z-eeeeee', failingAfter(3), {
      gate: false,
      keepRequests: (requests) => {
        kept.push(requests);
      },
    });

    await expect(failed).rejects.toBeInstanceOf(ExporterError);
    expect(kept).toEqual([expect.objectContaining({ total: 3 })]);
  });
});
