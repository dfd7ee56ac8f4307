import { Duration, RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as s3 from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';
import {
  ICEBERG_ROOT,
  PARQUET_ROOT,
  QUARANTINE_ROOT,
  RAW_ROOT,
  RUNS_ROOT,
  STATE_KEYS,
  STATE_ROOT,
} from '../../shared/layout.js';
import { RAW_TRANSITION, type RawStorageClass } from '../config.js';
import type { DataLakeAccess } from './data-lake-access.js';

/** Where Athena writes query results, at the bucket root (outside the data prefix). */
export const ATHENA_RESULTS_PREFIX = 'athena-results/';
/** Where the schedules' claims are: the layout's claim key up to its mode. */
export const SCHEDULED_STARTS_PREFIX = ((key) => key.slice(0, key.indexOf('<mode>')))(
  STATE_KEYS.scheduledStart('<mode>', '<time>'),
);
/** Every root of the output layout; the functions may touch objects under these only. */
export const DATA_ROOTS = [
  PARQUET_ROOT,
  ICEBERG_ROOT,
  RAW_ROOT,
  RUNS_ROOT,
  QUARANTINE_ROOT,
  STATE_ROOT,
] as const;
/** Overwritten and expired objects stay restorable this long (versioning), then go. */
export const NONCURRENT_VERSION_DAYS = 30;
/** Multipart uploads of a crashed Lambda leave parts behind; S3 bills them until aborted. */
export const ABORT_MULTIPART_DAYS = 7;
/**
 * A schedule's claim on a scheduled time only needs to outlive EventBridge Scheduler's retry
 * window (at most 24 hours): two days, so that a late retry still finds it.
 */
export const SCHEDULED_START_RETENTION_DAYS = 2;
/** State objects are rewritten every run: their old versions restore nothing useful. */
export const NONCURRENT_STATE_DAYS = 1;
/** The S3 class of each `rawStorageClass` value. */
const STORAGE_CLASSES: Readonly<Record<RawStorageClass, s3.StorageClass>> = {
  GLACIER_IR: s3.StorageClass.GLACIER_INSTANT_RETRIEVAL,
  STANDARD_IA: s3.StorageClass.INFREQUENT_ACCESS,
};
/** Access logs serve audits of the past year. */
export const ACCESS_LOG_RETENTION_DAYS = 365;

export interface DataLakeProps {
  /** `''` or `a/b/`: the root of the output layout inside the bucket. */
  readonly dataPrefix: string;
  /** Days after which raw JSON Lines (`<prefix>raw/`) expire; unset, they are kept. */
  readonly rawRetentionDays?: number | undefined;
  /** Days after which raw JSON Lines move to `rawStorageClass` (default {@link RAW_TRANSITION}). */
  readonly rawTransitionDays?: number | undefined;
  /** The class they move to: one Athena reads without a restore (default Glacier Instant Retrieval). */
  readonly rawStorageClass?: RawStorageClass | undefined;
  /** Days after which Athena query results expire. */
  readonly athenaResultsRetentionDays: number;
  /** Days after which quarantined bodies (`<prefix>quarantine/`) expire. */
  readonly quarantineRetentionDays: number;
}

/**
 * The data lake bucket and its server access log bucket. Encryption is SSE-S3: S3 server
 * access logging only delivers to SSE-S3 targets, Athena users and Glue need no key grants,
 * and no KMS request is billed per object read or written; TLS is enforced by bucket policy.
 */
export class DataLake extends Construct {
  readonly bucket: s3.Bucket;
  readonly accessLogBucket: s3.Bucket;
  readonly dataPrefix: string;

  constructor(scope: Construct, id: string, props: DataLakeProps) {
    super(scope, id);
    this.dataPrefix = props.dataPrefix;

    this.accessLogBucket = new s3.Bucket(this, 'AccessLogs', {
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      encryption: s3.BucketEncryption.S3_MANAGED,
      enforceSSL: true,
      minimumTLSVersion: 1.2,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      lifecycleRules: [{ id: 'expire-access-logs', expiration: Duration.days(ACCESS_LOG_RETENTION_DAYS) }],
      removalPolicy: RemovalPolicy.RETAIN,
    });

    this.bucket = new s3.Bucket(this, 'Bucket', {
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      encryption: s3.BucketEncryption.S3_MANAGED,
      enforceSSL: true,
      minimumTLSVersion: 1.2,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      versioned: true,
      serverAccessLogsBucket: this.accessLogBucket,
      serverAccessLogsPrefix: 'data-lake/',
      lifecycleRules: [
        {
          // The only lossless copy of what the API answered (it keeps no history): kept, in a
          // cheaper class Athena still reads, and expired only when the deployment says so.
          id: 'archive-raw',
          prefix: `${props.dataPrefix}${RAW_ROOT}/`,
          transitions: [
            {
              storageClass: STORAGE_CLASSES[props.rawStorageClass ?? RAW_TRANSITION.storageClass],
              transitionAfter: Duration.days(props.rawTransitionDays ?? RAW_TRANSITION.days),
            },
          ],
          expiration:
            props.rawRetentionDays === undefined ? undefined : Duration.days(props.rawRetentionDays),
        },
        {
          id: 'expire-quarantine',
          prefix: `${props.dataPrefix}${QUARANTINE_ROOT}/`,
          expiration: Duration.days(props.quarantineRetentionDays),
        },
        {
          id: 'expire-scheduled-starts',
          prefix: `${props.dataPrefix}${SCHEDULED_STARTS_PREFIX}`,
          expiration: Duration.days(SCHEDULED_START_RETENTION_DAYS),
        },
        {
          // Shorter than the bucket-wide rule below: S3 applies the earliest of overlapping expirations.
          id: 'expire-noncurrent-state',
          prefix: `${props.dataPrefix}${STATE_ROOT}/`,
          noncurrentVersionExpiration: Duration.days(NONCURRENT_STATE_DAYS),
        },
        {
          id: 'expire-athena-results',
          prefix: ATHENA_RESULTS_PREFIX,
          expiration: Duration.days(props.athenaResultsRetentionDays),
        },
        {
          id: 'expire-noncurrent-versions',
          noncurrentVersionExpiration: Duration.days(NONCURRENT_VERSION_DAYS),
          expiredObjectDeleteMarker: true,
          abortIncompleteMultipartUploadAfter: Duration.days(ABORT_MULTIPART_DAYS),
        },
      ],
      // The data lake outlives the stack: deleting the stack keeps the data.
      removalPolicy: RemovalPolicy.RETAIN,
    });
  }

  /** `s3://bucket/<prefix><key>`: a location inside the output layout. */
  s3Url(key: string): string {
    return `s3://${this.bucket.bucketName}/${this.dataPrefix}${key}`;
  }

  /**
   * Lets a function read, write and delete exactly the keys its access table names (patterns
   * relative to the data prefix; explicit actions, no wildcard action), and list the bucket.
   * s3:ListBucket has no prefix condition on purpose: S3 answers a GetObject of a missing key
   * with 404 only to a caller allowed to list the bucket, and that check does not carry an
   * s3:prefix, so a conditioned grant would turn "no state yet" into 403.
   */
  grantAccess(role: iam.IRole, access: DataLakeAccess): void {
    const objects = (patterns: readonly string[]) =>
      patterns.map((pattern) => this.bucket.arnForObjects(`${this.dataPrefix}${pattern}`));
    const statements = [
      { sid: 'DataLakeReads', actions: ['s3:GetObject'], patterns: access.read },
      // A multipart upload (publishing, a large body) cut short is aborted by the writer.
      { sid: 'DataLakeWrites', actions: ['s3:PutObject', 's3:AbortMultipartUpload'], patterns: access.write },
      { sid: 'DataLakeDeletes', actions: ['s3:DeleteObject'], patterns: access.delete },
    ];
    for (const { sid, actions, patterns } of statements) {
      if (patterns.length === 0) continue;
      role.addToPrincipalPolicy(new iam.PolicyStatement({ sid, actions, resources: objects(patterns) }));
    }
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'DataLakeList',
        actions: ['s3:ListBucket'],
        resources: [this.bucket.bucketArn],
      }),
    );
    const bucketId = Stack.of(this).getLogicalId(this.bucket.node.defaultChild as s3.CfnBucket);
    const patterns = new Set([...access.read, ...access.write, ...access.delete]);
    for (const pattern of [...patterns].filter((p) => p.includes('*'))) {
      Validations.of(role).acknowledge({
        id: `AwsSolutions-IAM5[Resource::<${bucketId}.Arn>/${this.dataPrefix}${pattern}]`,
        reason: `Object keys matching ${pattern} are created per run, campaign, unit and date (the output layout in shared/layout.ts); the grant names that pattern only, with explicit actions.`,
      });
    }
  }
}
