/**
 * The stack's outputs: the effective settings (so that `cdk diff` shows a deploy whose settings
 * differ from the deployed stack's), the functions' log groups and the dashboard's URL.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTEXT_KEYS } from '../../infra/config.js';
import { FUNCTION_NAMES, FUNCTION_SETTINGS } from '../../infra/constructs/functions.js';
import {
  functionIds,
  logicalIdOf,
  referencedIds,
  removeSynthOutputs,
  resourcesOf,
  type Synthesized,
  synthExporter,
} from './helpers.js';

type Outputs = Record<string, { Value: unknown; Description?: string }>;
const outputsOf = (s: Synthesized): Outputs => (s.template.toJSON() as { Outputs: Outputs }).Outputs;

/** What a deployment kept in its settings, and the same deployment with three settings changed. */
const BEFORE = {
  alarmEmail: 'ops@acme.test',
  scheduleCron: '0 4 * * ? *',
  scheduleTimeZone: 'Europe/Berlin',
  rawRetentionDays: '3650',
  tableFormat: 'iceberg',
  schemaContract: 'freeze',
};
const AFTER = { ...BEFORE, alarmEmail: 'data@acme.test', scheduleCron: '0 5 * * ? *', rawRetentionDays: '' };

let before: Synthesized;
let after: Synthesized;

beforeAll(() => {
  before = synthExporter(BEFORE);
  after = synthExporter(AFTER);
});
afterAll(removeSynthOutputs);

describe('settings as outputs', () => {
  it('outputs every setting given or defaulted under its key, capitalised, and none for an unset one', () => {
    const outputs = outputsOf(before);
    const config = before.stack.exporter.config;
    for (const key of CONTEXT_KEYS) {
      const name = key.charAt(0).toUpperCase() + key.slice(1);
      const value = config[key];
      if (value === undefined || value === '') expect(outputs[name], key).toBeUndefined();
      else expect(outputs[name]?.Value, key).toBe(String(value));
    }
    expect(outputs.ApiBaseUrl?.Value).toBe('https://api.acme.test');
    expect(outputs.AlarmEmail?.Value).toBe('ops@acme.test');
    expect(outputs.ScheduleCron?.Value).toBe('0 4 * * ? *');
    expect(outputs.TableFormat?.Value).toBe('iceberg');
    expect(outputs.SchemaContract?.Value).toBe('freeze');
    expect(outputsOf(synthExporter({})).SchemaContract?.Value).toBe('evolve');
    expect(outputs.RawRetentionDays?.Value).toBe('3650');
    expect(outputs.ProjectionStartDate?.Value).toBe('2025-01-01');
    expect(outputs.ExistingSecretName).toBeUndefined();
  });

  it('changes the outputs of exactly the settings that changed, so that cdk diff shows them', () => {
    const [a, b] = [outputsOf(before), outputsOf(after)];
    const names = [...new Set([...Object.keys(a), ...Object.keys(b)])];
    const changed = names.filter((n) => JSON.stringify(a[n]?.Value) !== JSON.stringify(b[n]?.Value));
    expect(changed.sort()).toEqual(['AlarmEmail', 'RawRetentionDays', 'ScheduleCron']);
    expect(b.AlarmEmail?.Value).toBe('data@acme.test');
    expect(b.RawRetentionDays).toBeUndefined();
  });
});

describe('where to look', () => {
  it('outputs the log group of each function', () => {
    const outputs = outputsOf(before);
    const fns = resourcesOf(before.template, 'AWS::Lambda::Function');
    const ids = functionIds(before.template);
    for (const name of FUNCTION_NAMES) {
      const logging = fns[ids[name]]!.Properties.LoggingConfig as { LogGroup: unknown };
      const [groupId] = [...referencedIds(logging.LogGroup)];
      expect(outputs[`${FUNCTION_SETTINGS[name].id}LogGroupName`]?.Value, name).toEqual({ Ref: groupId });
    }
  });

  it('outputs the console URL of the dashboard in the stack’s region', () => {
    const dashboard = logicalIdOf(before.template, 'AWS::CloudWatch::Dashboard', 'MonitoringDashboard');
    const region = { Ref: 'AWS::Region' };
    expect(outputsOf(before).DashboardUrl?.Value).toEqual({
      'Fn::Join': [
        '',
        [
          'https://',
          region,
          '.console.aws.amazon.com/cloudwatch/home?region=',
          region,
          '#dashboards/dashboard/',
          { Ref: dashboard },
        ],
      ],
    });
  });
});
