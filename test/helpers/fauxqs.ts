/**
 * A local S3 + SQS server for tests: fauxqs, in-process, over real HTTP on 127.0.0.1.
 *
 * fauxqs' own `startFauxqs()` always listens on 0.0.0.0; tests may only expose servers on the
 * loopback, so this helper builds the same Fastify app with `buildApp()` and listens itself.
 * The price: the in-memory shortcuts of `startFauxqs()` (createQueue, spy, …) are not there;
 * create buckets and queues through the API instead (`createBucket()` below, `CreateQueueCommand`).
 *
 * fauxqs 2 ignores If-None-Match / If-Match on PutObject; S3 enforces them, and the lock and
 * the scheduled-start claims rely on it. `enforceConditionalPuts` below adds S3's rules in
 * front of fauxqs' own handler, one write per key at a time, as S3 serialises them.
 */
import type { AddressInfo } from 'node:net';
import { CreateBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import { SQSClient } from '@aws-sdk/client-sqs';
import { buildApp } from 'fauxqs';
import { LOOPBACK_CREDENTIALS, LOOPBACK_REGION, loopbackS3Client } from './loopback-s3.js';

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

const REGION = LOOPBACK_REGION;
// fauxqs accepts any credentials and never checks signatures.
const CREDENTIALS = LOOPBACK_CREDENTIALS;

export interface LocalAwsOptions {
  /**
   * The largest request body taken, in bytes. fauxqs takes 11 MiB; S3 takes a single PUT up to
   * 5 GB, and a run of 100,000 reports has a larger closing record (the scale bench).
   */
  bodyLimit?: number;
}

/** Starts fauxqs (S3 + SQS over real HTTP) in-process on 127.0.0.1 and a free port. */
export async function startLocalAws(options: LocalAwsOptions = {}): Promise<LocalAws> {
  // Queue URLs come out as `http://sqs.<region>.localhost:<port>/000000000000/<name>`; they are
  // never dialled: with an explicit `endpoint`, the SQS client sends every request there.
  const app = buildApp({ logger: false, defaultRegion: REGION });
  if (options.bodyLimit !== undefined) {
    // fauxqs' own wildcard parser (S3's binary bodies), with the larger limit.
    app.removeContentTypeParser('*');
    app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: options.bodyLimit }, (_req, body, done) =>
      done(null, body),
    );
  }
  const log: LoggedRequest[] = [];
  app.addHook('onRequest', (request, _reply, done) => {
    // The conditional-put check's own HEAD is not a request a client sent.
    if (request.headers[CHECK_HEADER] !== undefined) return done();
    log.push({ method: request.method, url: request.url, headers: { ...request.headers } });
    done();
  });
  enforceConditionalPuts(app);
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  const endpoint = `http://127.0.0.1:${port}`;

  const clients: Array<{ destroy(): void }> = [];
  const s3Client = (): S3Client => {
    const client = loopbackS3Client(endpoint);
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

type FauxqsApp = ReturnType<typeof buildApp>;
/** Marks the HEAD a conditional put sends to fauxqs itself. */
const CHECK_HEADER = 'x-local-conditional-check';

/**
 * S3's conditional PutObject: `If-None-Match: *` fails with 412 when the key exists; `If-Match`
 * fails with 412 when its ETag differs and with 404 NoSuchKey when there is no object. A
 * conditional write holds its key from the check until its answer is sent, so two racing
 * writers cannot both pass the check.
 */
function enforceConditionalPuts(app: FauxqsApp): void {
  const held = new Map<string, Promise<void>>();
  const releases = new WeakMap<object, () => void>();
  app.addHook('preHandler', async (request, reply) => {
    const ifNoneMatch = request.headers['if-none-match'];
    const ifMatch = request.headers['if-match'];
    const path = request.url.split('?')[0] ?? '';
    if (request.method !== 'PUT' || (ifNoneMatch === undefined && ifMatch === undefined)) return;
    // Parts of a multipart upload take no conditions (the SDK adds `?x-id=PutObject` to a plain put).
    if (/[?&](uploadId|partNumber)=/.test(request.url)) return;
    while (held.has(path)) await held.get(path);
    let release!: () => void;
    held.set(path, new Promise<void>((resolve) => (release = resolve)));
    releases.set(request, () => {
      held.delete(path);
      release();
    });
    const head = await app.inject({ method: 'HEAD', url: path, headers: { [CHECK_HEADER]: '1' } });
    const etag = head.statusCode === 200 ? String(head.headers.etag ?? '') : undefined;
    const refuse = (status: number, code: string) =>
      reply
        .code(status)
        .header('content-type', 'application/xml')
        .send(
          `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${code}</Message></Error>`,
        );
    if (ifNoneMatch === '*' && etag !== undefined) return refuse(412, 'PreconditionFailed');
    if (ifMatch !== undefined && etag === undefined) return refuse(404, 'NoSuchKey');
    if (ifMatch !== undefined && unquote(String(ifMatch)) !== unquote(etag ?? ''))
      return refuse(412, 'PreconditionFailed');
  });
  app.addHook('onResponse', (request, _reply, done) => {
    releases.get(request)?.();
    done();
  });
}

const unquote = (etag: string): string => etag.replace(/^W\//, '').replace(/^"|"$/g, '');
