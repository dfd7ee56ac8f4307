/**
 * What an AWS SDK command asks IAM for: its action(s), the resource ARN(s) of the deployed
 * stack and the request's context keys. Local names (a fauxqs bucket or queue URL, a dynalite
 * table, the mocked secret and bus) are translated to the deployment's by {@link DeployedNames}.
 * A command this table does not know throws {@link UnmappedCallError}: an unknown call must
 * fail the test, not pass it.
 */
import type { RequestContext } from './policy.js';

/** The services whose clients the handlers use. */
export type Service = 's3' | 'sqs' | 'dynamodb' | 'secretsmanager' | 'events' | 'glue';

/** One authorization a command needs. */
export interface IamAction {
  readonly action: string;
  readonly resource: string;
  readonly context: RequestContext;
}

/** A call the tests cannot evaluate: a command, bucket, queue, table, secret or bus not mapped. */
export class UnmappedCallError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnmappedCallError';
  }
}

/** Local names to the deployed stack's ARNs (see guard.ts for the one built from environments). */
export interface DeployedNames {
  /** The deployed bucket's name for a local bucket. */
  bucket(localBucket: string): string;
  /** The deployed key for a local key (the data prefix translated). */
  key(localKey: string): string;
  queueArn(localQueueUrl: string): string;
  tableArn(localTableName: string): string;
  secretArn(localSecretId: string): string;
  busArn(localBusName: string | undefined): string;
  /**
   * The ARNs Glue authorizes a table call on: the catalog, the database and the table (Glue
   * checks all three), for a local database name (the container's GLUE_DATABASE).
   */
  glueTableArns(localDatabase: string, table: string, catalogId: string | undefined): string[];
  readonly partition: string;
}

/**
 * Context keys of every S3 request from the deployed functions: the SDK calls S3 over HTTPS
 * (TLS 1.2 or 1.3) with SigV4 in headers, whatever the local endpoint speaks.
 */
const S3_CONTEXT = {
  'aws:SecureTransport': 'true',
  's3:TlsVersion': '1.3',
  's3:signatureversion': 'AWS4-HMAC-SHA256',
  's3:authType': 'REST-HEADER',
} as const;
const HTTPS_CONTEXT = { 'aws:SecureTransport': 'true' } as const;

type Input = Readonly<Record<string, unknown>>;
type Mapper = (input: Input, names: DeployedNames) => IamAction[];

const str = (input: Input, field: string): string => {
  const value = input[field];
  if (typeof value !== 'string') throw new UnmappedCallError(`the command has no ${field}`);
  return value;
};

const objectArn = (n: DeployedNames, bucket: string, key: string) =>
  `arn:${n.partition}:s3:::${n.bucket(bucket)}/${n.key(key)}`;
const bucketArn = (n: DeployedNames, bucket: string) => `arn:${n.partition}:s3:::${n.bucket(bucket)}`;

const onObject =
  (action: string, versionAction?: string): Mapper =>
  (input, n) => [
    {
      action: input.VersionId !== undefined && versionAction ? versionAction : action,
      resource: objectArn(n, str(input, 'Bucket'), str(input, 'Key')),
      context: S3_CONTEXT,
    },
  ];

/** `bucket/key` of a copy source (URL-encoded, optionally `?versionId=`). */
const copySource: Mapper = (input, n) => {
  const source = decodeURIComponent(str(input, 'CopySource').replace(/^\//, '').split('?')[0]!);
  const slash = source.indexOf('/');
  return [
    {
      action: 's3:GetObject',
      resource: objectArn(n, source.slice(0, slash), source.slice(slash + 1)),
      context: S3_CONTEXT,
    },
  ];
};

const onBucket =
  (action: string, prefixed: boolean): Mapper =>
  (input, n) => {
    const context: Record<string, string> = { ...S3_CONTEXT };
    if (prefixed && typeof input.Prefix === 'string') context['s3:prefix'] = n.key(input.Prefix);
    if (prefixed && typeof input.Delimiter === 'string') context['s3:delimiter'] = input.Delimiter;
    if (prefixed && typeof input.MaxKeys === 'number') context['s3:max-keys'] = String(input.MaxKeys);
    return [{ action, resource: bucketArn(n, str(input, 'Bucket')), context }];
  };

const onQueue =
  (action: string): Mapper =>
  (input, n) => [{ action, resource: n.queueArn(str(input, 'QueueUrl')), context: HTTPS_CONTEXT }];

const onTable =
  (action: string): Mapper =>
  (input, n) => [{ action, resource: n.tableArn(str(input, 'TableName')), context: HTTPS_CONTEXT }];

const onSecret =
  (action: string): Mapper =>
  (input, n) => {
    const arn = n.secretArn(str(input, 'SecretId'));
    return [{ action, resource: arn, context: { ...HTTPS_CONTEXT, 'secretsmanager:SecretId': arn } }];
  };

/** A table call: the same action on the catalog, the database and the table. */
const onGlueTable =
  (action: string): Mapper =>
  (input, n) => {
    const table = input.Name ?? (input.TableInput as { Name?: unknown } | undefined)?.Name;
    if (typeof table !== 'string') throw new UnmappedCallError('the command names no table');
    const catalogId = typeof input.CatalogId === 'string' ? input.CatalogId : undefined;
    return n
      .glueTableArns(str(input, 'DatabaseName'), table, catalogId)
      .map((resource) => ({ action, resource, context: HTTPS_CONTEXT }));
  };

/** The commands the tables below map, by service, by the SDK's command class name. */
export const COMMAND_ACTIONS: Readonly<Record<Service, Readonly<Record<string, Mapper>>>> = {
  s3: {
    GetObjectCommand: onObject('s3:GetObject', 's3:GetObjectVersion'),
    HeadObjectCommand: onObject('s3:GetObject', 's3:GetObjectVersion'),
    PutObjectCommand: onObject('s3:PutObject'),
    CreateMultipartUploadCommand: onObject('s3:PutObject'),
    UploadPartCommand: onObject('s3:PutObject'),
    CompleteMultipartUploadCommand: onObject('s3:PutObject'),
    AbortMultipartUploadCommand: onObject('s3:AbortMultipartUpload'),
    ListPartsCommand: onObject('s3:ListMultipartUploadParts'),
    CopyObjectCommand: (input, n) => [...onObject('s3:PutObject')(input, n), ...copySource(input, n)],
    UploadPartCopyCommand: (input, n) => [...onObject('s3:PutObject')(input, n), ...copySource(input, n)],
    DeleteObjectCommand: onObject('s3:DeleteObject', 's3:DeleteObjectVersion'),
    // DeleteObjects is authorized key by key, as s3:DeleteObject.
    DeleteObjectsCommand: (input, n) => {
      const bucket = str(input, 'Bucket');
      const objects = (input.Delete as { Objects?: { Key?: string; VersionId?: string }[] } | undefined)
        ?.Objects;
      if (!objects?.length) throw new UnmappedCallError('DeleteObjects without objects');
      return objects.map((o) => ({
        action: o.VersionId === undefined ? 's3:DeleteObject' : 's3:DeleteObjectVersion',
        resource: objectArn(n, bucket, o.Key ?? ''),
        context: S3_CONTEXT,
      }));
    },
    ListObjectsV2Command: onBucket('s3:ListBucket', true),
    ListObjectsCommand: onBucket('s3:ListBucket', true),
    ListObjectVersionsCommand: onBucket('s3:ListBucketVersions', true),
    ListMultipartUploadsCommand: onBucket('s3:ListBucketMultipartUploads', true),
    HeadBucketCommand: onBucket('s3:ListBucket', false),
    GetBucketLocationCommand: onBucket('s3:GetBucketLocation', false),
  },
  sqs: {
    SendMessageCommand: onQueue('sqs:SendMessage'),
    SendMessageBatchCommand: onQueue('sqs:SendMessage'),
    ReceiveMessageCommand: onQueue('sqs:ReceiveMessage'),
    DeleteMessageCommand: onQueue('sqs:DeleteMessage'),
    DeleteMessageBatchCommand: onQueue('sqs:DeleteMessage'),
    ChangeMessageVisibilityCommand: onQueue('sqs:ChangeMessageVisibility'),
    ChangeMessageVisibilityBatchCommand: onQueue('sqs:ChangeMessageVisibility'),
    GetQueueAttributesCommand: onQueue('sqs:GetQueueAttributes'),
    PurgeQueueCommand: onQueue('sqs:PurgeQueue'),
  },
  dynamodb: {
    GetItemCommand: onTable('dynamodb:GetItem'),
    PutItemCommand: onTable('dynamodb:PutItem'),
    UpdateItemCommand: onTable('dynamodb:UpdateItem'),
    DeleteItemCommand: onTable('dynamodb:DeleteItem'),
    QueryCommand: onTable('dynamodb:Query'),
    ScanCommand: onTable('dynamodb:Scan'),
    DescribeTableCommand: onTable('dynamodb:DescribeTable'),
  },
  secretsmanager: {
    GetSecretValueCommand: onSecret('secretsmanager:GetSecretValue'),
    DescribeSecretCommand: onSecret('secretsmanager:DescribeSecret'),
  },
  glue: {
    GetTableCommand: onGlueTable('glue:GetTable'),
    UpdateTableCommand: onGlueTable('glue:UpdateTable'),
  },
  events: {
    // Each entry is authorized on its bus, with its source and detail type as context keys.
    PutEventsCommand: (input, n) => {
      const entries = input.Entries as
        | { EventBusName?: string; Source?: string; DetailType?: string }[]
        | undefined;
      if (!entries?.length) throw new UnmappedCallError('PutEvents without entries');
      return entries.map((e) => ({
        action: 'events:PutEvents',
        resource: n.busArn(e.EventBusName),
        context: { ...HTTPS_CONTEXT, 'events:source': e.Source, 'events:detail-type': e.DetailType },
      }));
    },
  },
};

/** The authorizations one command needs; throws {@link UnmappedCallError} for anything unmapped. */
export function iamActionsOf(
  service: Service,
  command: string,
  input: Input,
  names: DeployedNames,
): IamAction[] {
  const mapper = COMMAND_ACTIONS[service][command];
  if (mapper === undefined) throw new UnmappedCallError(`${service} ${command} is not mapped to IAM`);
  return mapper(input, names);
}
