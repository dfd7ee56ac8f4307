/** MAX_BODY_MIB reaches the client a Lambda container builds: an answer over it fails its report. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ExportDeps } from '../../../shared/export/run/context.js';
import { startServer, type TestServer } from '../../integration/api/server.js';
import { reportData } from '../api/fixtures.js';

const MIB = 1024 * 1024;

/** A Get Report answer of exactly `bytes` bytes, padded with a field the schema ignores. */
function reportOfSize(bytes: number): string {
  const bare = JSON.stringify({ data: reportData(2), padding: '' });
  return JSON.stringify({ data: reportData(2), padding: 'x'.repeat(bytes - bare.length) });
}

describe('the client of a Lambda container', () => {
  let server: TestServer;
  let exportDeps: (context: { apiKey?: unknown }) => ExportDeps;

  beforeAll(async () => {
    const bodies = [reportOfSize(MIB), reportOfSize(MIB + 1)];
    server = await startServer((req) => ({ body: bodies[req.nth - 1] ?? '' }));
    // runtime.ts reads its environment when it loads.
    Object.assign(process.env, {
      AWS_REGION: 'us-east-1',
      DATA_BUCKET: 'bucket',
      API_BASE_URL: server.url,
      MAX_BODY_MIB: '1',
    });
    ({ exportDeps } = await import('../../../functions/aws/runtime.js'));
  });

  afterAll(async () => {
    await server?.close();
  });

  it('reads an answer of MAX_BODY_MIB and fails a report one byte larger, naming the limit', async () => {
    const api = exportDeps({ apiKey: 'test-key' }).api();

    const atLimit = await api.getReport(1, 2);
    const over = await api.getReport(1, 2);

    expect(atLimit.kind).toBe('ok');
    expect(over).toMatchObject({ kind: 'failed', retryable: false });
    if (over.kind === 'failed') expect(over.error.message).toContain('larger than 1 MiB');
    expect(server.requests).toHaveLength(2);
  });
});
