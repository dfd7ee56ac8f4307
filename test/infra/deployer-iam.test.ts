/**
 * The deployer's permissions as docs/deploy.md states them, evaluated against the synthesized
 * stack: docs/iam/deployer-policy.json lets a deployer assume the CDK bootstrap roles the stack's
 * cloud assembly names (the deploy itself goes through them) and make every AWS call of the docs'
 * runbooks and of the `aws` command, and nothing that would deploy around the bootstrap roles;
 * docs/iam/cfn-execution-policy.json, for a bootstrap narrower than its default
 * AdministratorAccess, lets CloudFormation create every resource type the stack's templates hold
 * (the default and one with every optional resource).
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Deployment, synthesizedTemplate } from '../helpers/iam/deployment.js';
import { TEST_TARGET } from '../helpers/iam/intrinsics.js';
import { evaluate, type NamedPolicy, type PolicyDocument } from '../helpers/iam/policy.js';
import { codeBlocks, parseMarkdown } from '../helpers/markdown.js';
import { removeSynthOutputs, synthExporter } from './helpers.js';

const ROOT = new URL('../../', import.meta.url);
const policyOf = (name: string): NamedPolicy => ({
  name,
  document: JSON.parse(readFileSync(new URL(`docs/iam/${name}`, ROOT), 'utf8')) as PolicyDocument,
});
const DEPLOYER = policyOf('deployer-policy.json');
const CFN_EXECUTION = policyOf('cfn-execution-policy.json');
const CALLER = `arn:aws:iam::${TEST_TARGET.account}:user/deployer`;
const { account, region, stackName: STACK_NAME } = TEST_TARGET;

/** The pseudo parameters of the cloud assembly's role ARNs, as the test target has them. */
const PSEUDO: Readonly<Record<string, string>> = { Partition: 'aws', AccountId: account, Region: region };

const allowed = (policy: NamedPolicy, action: string, resource: string, context = {}) =>
  evaluate({ principal: CALLER, action, resource, context }, { identity: [policy] }).decision;

/** Every optional resource on: the egress VPC, the alarm e-mail, Iceberg tables. */
const EVERYTHING = { fixedEgressIp: 'true', alarmEmail: 'ops@acme.test', tableFormat: 'iceberg' };

afterAll(removeSynthOutputs);

describe('the deployer deploys through the CDK bootstrap roles', () => {
  let roles: string[];
  beforeAll(() => {
    const { outdir } = synthExporter();
    const read = (file: string) =>
      JSON.parse(readFileSync(`${outdir}/${file}`, 'utf8')) as Record<string, unknown>;
    const text = JSON.stringify([read('manifest.json'), read(`${STACK_NAME}.assets.json`)]);
    // The roles `cdk deploy` assumes: deploy, lookup and file publishing (not the CloudFormation
    // execution role, which the deploy role passes to CloudFormation).
    roles = [...new Set(text.match(/arn:\$\{AWS::Partition\}:iam::\$\{AWS::AccountId\}:role\/[^"]+/g) ?? [])]
      .filter((arn) => !arn.includes('cfn-exec-role'))
      .map((arn) => arn.replace(/\$\{AWS::(\w+)\}/g, (_all, name: string) => PSEUDO[name] ?? `(${name})`));
  }, 120_000);

  it('may assume each role the cloud assembly names', () => {
    expect(roles.some((arn) => arn.includes('-deploy-role-'))).toBe(true);
    expect(roles.some((arn) => arn.includes('-file-publishing-role-'))).toBe(true);
    for (const role of roles) expect(allowed(DEPLOYER, 'sts:AssumeRole', role), role).toBe('allow');
  });

  it('may not deploy around them', () => {
    const stack = `arn:aws:cloudformation:${region}:${account}:stack/${STACK_NAME}/0`;
    expect(allowed(DEPLOYER, 'cloudformation:CreateChangeSet', stack)).toBe('implicit-deny');
    expect(
      allowed(DEPLOYER, 'iam:PassRole', `arn:aws:iam::${account}:role/cdk-hnb659fds-cfn-exec-role`),
    ).toBe('implicit-deny');
    expect(allowed(DEPLOYER, 'iam:CreateRole', `arn:aws:iam::${account}:role/x`)).toBe('implicit-deny');
  });
});

describe('the deployer makes every AWS call of the runbooks and of the aws command', () => {
  let deployment: Deployment;
  beforeAll(async () => {
    deployment = await Deployment.load(EVERYTHING);
  }, 120_000);

  /** The physical ARN of the stack's resource of `type` whose logical id starts with `prefix`. */
  const arnOf = (type: string, prefix: string, attribute = 'Arn'): string => {
    const found = deployment.resourcesOf(type).find(([id]) => id.startsWith(prefix));
    expect(found, `${type} ${prefix}*`).toBeDefined();
    const id = found?.[0] ?? '';
    return attribute === 'Ref'
      ? String(deployment.resolver.ref(id))
      : deployment.resolver.getAtt(id, attribute);
  };

  /** Each `aws <service> <command>` of the docs' runbooks: the IAM calls it makes, on what. */
  const calls = (): Record<
    string,
    [action: string, resource: string, context?: Record<string, string>][]
  > => {
    const stack = `arn:aws:cloudformation:${region}:${account}:stack/${STACK_NAME}/0`;
    const bucket = arnOf('AWS::S3::Bucket', 'DataLakeBucket');
    const logs = arnOf('AWS::S3::Bucket', 'DataLakeAccessLogs');
    const analystPolicy = arnOf('AWS::IAM::ManagedPolicy', 'Analysts', 'Ref');
    const queue = arnOf('AWS::SQS::Queue', 'Queues');
    const [runsFailed] = deployment
      .resourcesOf('AWS::CloudWatch::Alarm')
      .filter(([id]) => id.startsWith('MonitoringRunsFailed'));
    expect(runsFailed, 'the RunsFailed alarm').toBeDefined();
    const alarmName = deployment.resolver.physicalName(runsFailed?.[0] ?? '', 'AlarmName');
    const alarm = `arn:aws:cloudwatch:${region}:${account}:alarm:${alarmName}`;
    return {
      'cloudformation describe-stacks': [['cloudformation:DescribeStacks', stack]],
      'cloudformation list-stack-resources': [['cloudformation:ListStackResources', stack]],
      'secretsmanager put-secret-value': [
        ['secretsmanager:PutSecretValue', arnOf('AWS::SecretsManager::Secret', 'ApiKeySecret', 'Ref')],
      ],
      'secretsmanager delete-secret': [
        ['secretsmanager:DeleteSecret', arnOf('AWS::SecretsManager::Secret', 'ApiKeySecret', 'Ref')],
      ],
      'lambda invoke': [['lambda:InvokeFunction', arnOf('AWS::Lambda::Function', 'FunctionsStartRun')]],
      'sqs receive-message': [['sqs:ReceiveMessage', queue]],
      'sqs purge-queue': [['sqs:PurgeQueue', queue]],
      'iam attach-role-policy': [
        [
          'iam:AttachRolePolicy',
          `arn:aws:iam::${account}:role/data-analysts`,
          { 'iam:PolicyARN': analystPolicy },
        ],
      ],
      'iam attach-group-policy': [
        [
          'iam:AttachGroupPolicy',
          `arn:aws:iam::${account}:group/analysts`,
          { 'iam:PolicyARN': analystPolicy },
        ],
      ],
      'ec2 describe-addresses': [['ec2:DescribeAddresses', '*']],
      'ec2 release-address': [
        ['ec2:ReleaseAddress', `arn:aws:ec2:${region}:${account}:elastic-ip/eipalloc-1`],
      ],
      's3api list-object-versions': [bucket, logs].map((b) => ['s3:ListBucketVersions', b]),
      's3api delete-objects': [bucket, logs].flatMap((b) => [
        ['s3:DeleteObject', `${b}/raw/x`],
        ['s3:DeleteObjectVersion', `${b}/raw/x`],
      ]),
      's3api delete-bucket': [bucket, logs].map((b) => ['s3:DeleteBucket', b]),
      'sns list-subscriptions-by-topic': [
        ['sns:ListSubscriptionsByTopic', arnOf('AWS::SNS::Topic', 'MonitoringAlarmTopic', 'Ref')],
      ],
      'cloudwatch describe-alarms': [['cloudwatch:DescribeAlarms', '*']],
      'cloudwatch describe-alarm-history': [['cloudwatch:DescribeAlarmHistory', '*']],
      'cloudwatch set-alarm-state': [['cloudwatch:SetAlarmState', alarm]],
      'logs tail': ['FunctionsStartRunLogs', 'FunctionsFinishRunLogs'].map((id) => [
        'logs:FilterLogEvents',
        arnOf('AWS::Logs::LogGroup', id),
      ]),
      'logs delete-log-group': ['FunctionsStartRunLogs', 'EgressFlowLogs'].map((id) => [
        'logs:DeleteLogGroup',
        arnOf('AWS::Logs::LogGroup', id),
      ]),
      // `npm run aws -- start|status|runs` (functions/cli/aws-stack.ts, aws-runs.ts): the stack's
      // outputs, a synchronous invoke of start-run, and reads of state/ and runs/.
      'npm run aws': [
        ['cloudformation:DescribeStacks', stack],
        ['lambda:InvokeFunction', arnOf('AWS::Lambda::Function', 'FunctionsStartRun')],
        ['s3:ListBucket', bucket],
        ['s3:GetObject', `${bucket}/state/lock.json`],
        ['s3:GetObject', `${bucket}/runs/dt=2026-11-22/20261122T031500Z-a1b2c3.json`],
      ],
    };
  };

  /** The `aws` calls of the `sh aws` blocks of the deployer's pages (ingest.md's rule is a consumer's). */
  const documented = (): Set<string> => {
    const found = new Set<string>();
    for (const page of ['docs/deploy.md', 'docs/operate.md', 'docs/cli.md']) {
      const source = readFileSync(new URL(page, ROOT), 'utf8');
      for (const block of codeBlocks({ source, tree: parseMarkdown(source) })) {
        if (block.lang !== 'sh' || !block.markers.includes('aws')) continue;
        for (const m of block.value.matchAll(/(?:^|[\s$(;|&])aws ([a-z0-9]+) ([a-z][a-z0-9-]+)/gm))
          found.add(`${m[1]} ${m[2]}`);
        if (/npm run (?:--silent )?aws\b/.test(block.value)) found.add('npm run aws');
      }
    }
    return found;
  };

  it('knows each call the docs make (a new one goes into this table and the policy)', () => {
    const known = calls();
    for (const call of documented()) expect(Object.keys(known), call).toContain(call);
  });

  it('allows each of them on the stack’s resources', () => {
    const known = calls();
    for (const call of documented())
      for (const [action, resource, context] of known[call] ?? [])
        expect(allowed(DEPLOYER, action, resource, context), `${call}: ${action} on ${resource}`).toBe(
          'allow',
        );
  });

  it('gives analysts the stack’s policy only', () => {
    const other = { 'iam:PolicyARN': 'arn:aws:iam::aws:policy/AdministratorAccess' };
    expect(
      allowed(DEPLOYER, 'iam:AttachRolePolicy', `arn:aws:iam::${account}:role/data-analysts`, other),
    ).toBe('implicit-deny');
  });
});

/**
 * For each resource type of the templates, a call CloudFormation makes to create it. A type
 * the stack gains must be added here, and its service to docs/iam/cfn-execution-policy.json.
 */
const CREATE_CALLS: Readonly<Record<string, readonly string[]>> = {
  'AWS::Athena::NamedQuery': ['athena:CreateNamedQuery'],
  'AWS::Athena::WorkGroup': ['athena:CreateWorkGroup'],
  'AWS::CloudWatch::Alarm': ['cloudwatch:PutMetricAlarm'],
  'AWS::CloudWatch::Dashboard': ['cloudwatch:PutDashboard'],
  'AWS::DynamoDB::Table': ['dynamodb:CreateTable'],
  'AWS::EC2::EIP': ['ec2:AllocateAddress'],
  'AWS::EC2::FlowLog': ['ec2:CreateFlowLogs'],
  'AWS::EC2::InternetGateway': ['ec2:CreateInternetGateway'],
  'AWS::EC2::NatGateway': ['ec2:CreateNatGateway'],
  'AWS::EC2::Route': ['ec2:CreateRoute'],
  'AWS::EC2::RouteTable': ['ec2:CreateRouteTable'],
  'AWS::EC2::SecurityGroup': ['ec2:CreateSecurityGroup'],
  'AWS::EC2::Subnet': ['ec2:CreateSubnet'],
  'AWS::EC2::SubnetRouteTableAssociation': ['ec2:AssociateRouteTable'],
  'AWS::EC2::VPC': ['ec2:CreateVpc'],
  'AWS::EC2::VPCEndpoint': ['ec2:CreateVpcEndpoint'],
  'AWS::EC2::VPCGatewayAttachment': ['ec2:AttachInternetGateway'],
  'AWS::Glue::Database': ['glue:CreateDatabase'],
  'AWS::Glue::Table': ['glue:CreateTable'],
  'AWS::IAM::ManagedPolicy': ['iam:CreatePolicy'],
  'AWS::IAM::Policy': ['iam:PutRolePolicy'],
  'AWS::IAM::Role': ['iam:CreateRole', 'iam:PassRole', 'iam:AttachRolePolicy'],
  'AWS::KMS::Key': ['kms:CreateKey'],
  'AWS::Lambda::EventInvokeConfig': ['lambda:PutFunctionEventInvokeConfig'],
  'AWS::Lambda::EventSourceMapping': ['lambda:CreateEventSourceMapping'],
  'AWS::Lambda::Function': ['lambda:CreateFunction'],
  'AWS::Logs::LogGroup': ['logs:CreateLogGroup'],
  'AWS::S3::Bucket': ['s3:CreateBucket'],
  'AWS::S3::BucketPolicy': ['s3:PutBucketPolicy'],
  'AWS::SNS::Subscription': ['sns:Subscribe'],
  'AWS::SNS::Topic': ['sns:CreateTopic'],
  'AWS::SNS::TopicPolicy': ['sns:SetTopicAttributes'],
  'AWS::SQS::Queue': ['sqs:CreateQueue'],
  'AWS::SQS::QueuePolicy': ['sqs:SetQueueAttributes'],
  'AWS::Scheduler::Schedule': ['scheduler:CreateSchedule'],
  'AWS::SecretsManager::Secret': ['secretsmanager:CreateSecret'],
};

describe('a narrower CloudFormation execution role covers the template', () => {
  it('allows a create call of every resource type, IAM only on the stack’s own roles and policies', async () => {
    const types = new Set<string>();
    for (const context of [{}, EVERYTHING]) {
      const template = await synthesizedTemplate(context);
      for (const resource of Object.values(template.Resources)) types.add(resource.Type);
    }
    types.delete('AWS::CDK::Metadata'); // Not created: CloudFormation records it.
    for (const type of types) {
      const actions = CREATE_CALLS[type];
      expect(
        actions,
        `${type}: add its create call to CREATE_CALLS and its service to the policy`,
      ).toBeDefined();
      for (const action of actions ?? []) {
        const resource = action.startsWith('iam:')
          ? `arn:aws:iam::${account}:${type.endsWith('ManagedPolicy') ? 'policy' : 'role'}/${STACK_NAME}-Role-GENERATED`
          : '*';
        expect(allowed(CFN_EXECUTION, action, resource), `${type}: ${action}`).toBe('allow');
      }
    }
    expect(allowed(CFN_EXECUTION, 'iam:CreateRole', `arn:aws:iam::${account}:role/someone-else`)).toBe(
      'implicit-deny',
    );
  }, 180_000);
});
