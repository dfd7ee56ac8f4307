/**
 * A local S3 + SQS server for tests: fauxqs, in-process, over real HTTP on 127.0.0.1.
 *
 * fauxqs' own `startFauxqs()` always listens on 0.0.0.0; tests may only expose servers on the
 * loopback, so this helper builds the same Fastify app with `buildApp()` and listens itself.
 * The price: the in-memory shortcuts of `startFauxqs()` (createQueue, spy, …) are not there;
 * create buckets and queues through the API instead (`createBucket()` below, `CreateQueueCommand`).
 */
import type { AddressInfo } from 'node:net';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { SQSClient } from '@aws-sdk/client-sqs';
import { buildApp } from 'fauxqs';

export interface LoggedRequest {
  method: string;
  /** Path and query as received, e.g. `/bucket/key?uploadId=…&partNumber=1`. */
  url: string;
  headers: Readonly<Record<string, string | string[] | undefined>>;
}

export interface LocalAws {
  /** `http://127.0.0.1:<port>` */
  endpoint: string;
  region: string;
  credentials: { accessKeyId: string; secretAccessKey: string };
  /** A new S3 client for this server (path-style). Destroyed by `close()`. */
  s3Client(): S3Client;
  /** A new SQS client for this server. Destroyed by `close()`. */
  sqsClient(): SQSClient;
  /** Creates a bucket through the S3 API (idempotent). */
  createBucket(name: string): Promise<void>;
  /** Every HTTP request the server received so far, in arrival order. */
  requests(): readonly LoggedRequest[];
  /** Forgets the requests logged so far. */
  clearRequests(): void;
  /** Destroys the clients handed out and stops the server; its port is free afterwards. */
  close(): Promise<void>;
}

const REGION = 'us-east-1';
// fauxqs accepts any credentials and never checks signatures.
const CREDENTIALS = { accessKeyId: 'test', secretAccessKey: 'test' };

/** Starts fauxqs (S3 + SQS over real HTTP) in-process on 127.0.0.1 and a free port. */
export async function startLocalAws(): Promise<LocalAws> {
  // Queue URLs come out as `http://sqs.<region>.localhost:<port>/000000000000/<name>`; they are
  // never dialled: with an explicit `endpoint`, the SQS client sends every request there.
  const app = buildApp({ logger: false, defaultRegion: REGION });
  const log: LoggedRequest[] = [];
  app.addHook('onRequest', (request, _reply, done) => {
    log.push({ method: request.method, url: request.url, headers: { ...request.headers } });
    done();
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  const endpoint = `http://127.0.0.1:${port}`;

  const clients: Array<{ destroy(): void }> = [];
  const s3Client = (): S3Client => {
    const client = new S3Client({ endpoint, region: REGION, credentials: CREDENTIALS, forcePathStyle: true });
    clients.push(client);
    return client;
  };
  const sqsClient = (): SQSClient => {
    const client = new SQSClient({ endpoint, region: REGION, credentials: CREDENTIALS });
    clients.push(client);
    return client;
  };
  let adminClient: S3Client | undefined;

  return {
    endpoint,
    region: REGION,
    credentials: { ...CREDENTIALS },
    s3Client,
    sqsClient,
    async createBucket(name) {
      adminClient ??= s3Client();
      await adminClient.send(new CreateBucketCommand({ Bucket: name }));
    },
    requests: () => log,
    clearRequests() {
      log.length = 0;
    },
    async close() {
      for (const client of clients.splice(0)) client.destroy();
      // buildApp sets forceCloseConnections, so keep-alive sockets do not hold close() open.
      await app.close();
    },
  };
}
