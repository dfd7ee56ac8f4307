/**
 * An S3 client for the local S3 server the tests start on 127.0.0.1 (fauxqs, `fauxqs.ts`), in a
 * module of its own so that a benchmark's child process can build one without loading the server.
 */
import { S3Client } from '@aws-sdk/client-s3';

/** The region and the credentials the local server accepts. */
export const LOOPBACK_REGION = 'us-east-1';
export const LOOPBACK_CREDENTIALS = { accessKeyId: 'test', secretAccessKey: 'test' };

/** A path-style client of the local S3 server at `endpoint` (`http://127.0.0.1:<port>`). */
export const loopbackS3Client = (endpoint: string): S3Client =>
  new S3Client({
    endpoint,
    region: LOOPBACK_REGION,
    credentials: LOOPBACK_CREDENTIALS,
    forcePathStyle: true,
  });
