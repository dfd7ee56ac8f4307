/**
 * What a person set up outlives the stack: the API key secret and the egress Elastic IP are
 * retained, an existing allocation can be given instead, and an imported secret under a
 * customer managed key can be decrypted by its readers (through Secrets Manager only).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_FUNCTIONS } from '../../infra/constructs/functions.js';
import {
  actionsOf,
  allowStatements,
  functionIds,
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

beforeAll(() => {
  created = synthExporter({ fixedEgressIp: true });
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
