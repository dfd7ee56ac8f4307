/**
 * What a person set up outlives the stack: the API key secret and the egress Elastic IP are
 * retained, an existing allocation can be given instead, and an imported secret under a
 * customer managed key can be decrypted by its readers (through Secrets Manager only). raw/,
 * the only lossless copy, is kept by default; and what `cdk destroy` keeps is what
 * docs/deploy.md's teardown lists.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_FUNCTIONS } from '../../infra/constructs/functions.js';
import {
  actionsOf,
  allowStatements,
  functionIds,
  logicalIdOf,
  referencedIds,
  removeSynthOutputs,
  resourcesOf,
  type Synthesized,
  synthExporter,
} from './helpers.js';

const KEY_ARN = 'arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab';
const ALLOCATION = 'eipalloc-0123456789abcdef0';

let created: Synthesized;
let imported: Synthesized;
let archived: Synthesized;

beforeAll(() => {
  created = synthExporter({ fixedEgressIp: true });
  archived = synthExporter({
    rawStorageClass: 'standard_ia',
    rawTransitionDays: '30',
    rawRetentionDays: '3650',
  });
  imported = synthExporter({
    fixedEgressIp: true,
    egressEipAllocationId: ALLOCATION,
    existingSecretName: 'acme/integration-api-key',
    existingSecretKmsKeyArn: KEY_ARN,
  });
});
afterAll(removeSynthOutputs);

describe('created by the stack', () => {
  it('retains the API key secret and the Elastic IP when the stack is deleted', () => {
    for (const type of ['AWS::SecretsManager::Secret', 'AWS::EC2::EIP']) {
      const resources = created.template.findResources(type);
      expect(Object.keys(resources), type).toHaveLength(1);
      expect(Object.values(resources)[0], type).toMatchObject({
        DeletionPolicy: 'Retain',
        UpdateReplacePolicy: 'Retain',
      });
    }
  });

  it('outputs the put-key command reading the key from a file, never from the command line', () => {
    const secretId = Object.keys(resourcesOf(created.template, 'AWS::SecretsManager::Secret'))[0]!;
    created.template.hasOutput('PutKeyCommand', {
      Value: {
        'Fn::Join': [
          '',
          [
            'aws secretsmanager put-secret-value --secret-id ',
            { Ref: secretId },
            ' --secret-string file://key.txt',
          ],
        ],
      },
    });
    const secret = resourcesOf(created.template, 'AWS::SecretsManager::Secret')[secretId]!;
    expect(secret.Properties.Description).toContain(
      '--secret-id CampaignReportExporter/integration-api-key --secret-string file://key.txt',
    );
    expect(JSON.stringify(created.template.toJSON())).not.toContain("'<key>'");
  });

  it('outputs the Elastic IP address', () => {
    const eip = Object.keys(resourcesOf(created.template, 'AWS::EC2::EIP'))[0]!;
    created.template.hasOutput('EgressIpAddress', { Value: { 'Fn::GetAtt': [eip, 'PublicIp'] } });
  });
});

describe('given by the deployment', () => {
  it('puts the NAT gateway on the given Elastic IP and allocates none', () => {
    imported.template.resourceCountIs('AWS::EC2::EIP', 0);
    imported.template.resourceCountIs('AWS::EC2::NatGateway', 1);
    imported.template.hasResourceProperties('AWS::EC2::NatGateway', { AllocationId: ALLOCATION });
  });

  it('outputs the allocation id, as CloudFormation does not know the address', () => {
    const outputs = (imported.template.toJSON() as { Outputs: Record<string, { Value: unknown }> }).Outputs;
    expect(outputs.EgressIpAddress).toBeUndefined();
    expect(outputs.EgressEipAllocationId?.Value).toBe(ALLOCATION);
  });

  it('lets the key readers, and only them, decrypt with the secret’s key through Secrets Manager', () => {
    const decrypts = allowStatements(imported.template).filter(({ statement }) =>
      actionsOf(statement).includes('kms:Decrypt'),
    );
    expect(decrypts).toHaveLength(API_FUNCTIONS.length);
    for (const { statement } of decrypts) {
      expect(statement).toMatchObject({
        Action: 'kms:Decrypt',
        Resource: KEY_ARN,
        Condition: {
          StringEquals: {
            'kms:ViaService': {
              'Fn::Join': ['', ['secretsmanager.', { Ref: 'AWS::Region' }, '.amazonaws.com']],
            },
          },
        },
      });
    }
    const fns = resourcesOf(imported.template, 'AWS::Lambda::Function');
    const ids = functionIds(imported.template);
    const readerRoles = API_FUNCTIONS.map((n) => [...referencedIds(fns[ids[n]]!.Properties.Role)][0]!);
    expect(decrypts.flatMap(({ roles }) => [...roles]).sort()).toEqual(readerRoles.sort());
  });

  it('grants no KMS access without an imported key', () => {
    const decrypts = allowStatements(created.template).filter(({ statement }) =>
      actionsOf(statement).some((a) => a.startsWith('kms:')),
    );
    expect(decrypts).toEqual([]);
  });
});

describe('raw/, the only lossless copy', () => {
  const rawRule = (s: Synthesized) => {
    const bucket = resourcesOf(s.template, 'AWS::S3::Bucket')[
      logicalIdOf(s.template, 'AWS::S3::Bucket', 'DataLakeBucket')
    ]!;
    const rules = (bucket.Properties.LifecycleConfiguration as { Rules: { Prefix?: string }[] }).Rules;
    const raw = rules.filter((r) => r.Prefix === 'raw/');
    expect(raw).toHaveLength(1);
    return raw[0];
  };

  it('moves to Glacier Instant Retrieval after 90 days and never expires by default', () => {
    expect(rawRule(created)).toEqual({
      Id: 'archive-raw',
      Prefix: 'raw/',
      Transitions: [{ StorageClass: 'GLACIER_IR', TransitionInDays: 90 }],
      Status: 'Enabled',
    });
  });

  it('moves to the class and at the age the deployment sets, and expires only when it sets a retention', () => {
    expect(rawRule(archived)).toEqual({
      Id: 'archive-raw',
      Prefix: 'raw/',
      Transitions: [{ StorageClass: 'STANDARD_IA', TransitionInDays: 30 }],
      ExpirationInDays: 3650,
      Status: 'Enabled',
    });
  });
});

/** The logical id prefixes the table of docs/deploy.md "Deleting the stack" names as kept. */
function documentedKept(): string[] {
  const page = readFileSync(new URL('../../docs/deploy.md', import.meta.url), 'utf8');
  const section = page.slice(page.indexOf('\n## Deleting the stack'));
  const end = section.indexOf('\n## ', 1);
  const lines = (end === -1 ? section : section.slice(0, end)).split('\n');
  const header = lines.findIndex((l) => l.startsWith('| kept | logical id |'));
  expect(header, 'the table of what cdk destroy keeps').toBeGreaterThan(-1);
  const ids: string[] = [];
  for (const line of lines.slice(header + 2)) {
    if (!line.startsWith('|')) break;
    const cell = line.split('|')[2]!;
    ids.push(...[...cell.matchAll(/`([A-Za-z0-9]+)`/g)].map((m) => m[1]!));
  }
  return ids;
}

describe('deleting the stack', () => {
  it('keeps exactly what docs/deploy.md lists as kept, each by one line of its table', () => {
    const documented = documentedKept();
    const used = new Set<string>();
    for (const s of [created, imported, archived]) {
      const resources = s.template.toJSON().Resources as Record<string, { DeletionPolicy?: string }>;
      const kept = Object.entries(resources)
        .filter(([, r]) => r.DeletionPolicy !== undefined && r.DeletionPolicy !== 'Delete')
        .map(([id]) => id);
      for (const id of kept) {
        const prefixes = documented.filter((p) => id.startsWith(p));
        expect(prefixes, `${id}: one line of the table names it`).toHaveLength(1);
        used.add(prefixes[0]!);
      }
    }
    // Every line names something the stack keeps (created secret and Elastic IP included).
    expect([...used].sort()).toEqual([...documented].sort());
  });
});
