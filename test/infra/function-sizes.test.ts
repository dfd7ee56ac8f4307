/**
 * The functions' memory and timeouts as settings (infra/function-sizes.ts, infra/config.ts):
 * today's sizes by default, a setting applied to its function and to the queue it consumes,
 * and every bad value refused naming its key.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InfraConfigError, parseConfig } from '../../infra/config.js';
import { FUNCTION_NAMES, type FunctionName } from '../../infra/constructs/functions.js';
import {
  functionIds,
  logicalIdOf,
  removeSynthOutputs,
  resourcesOf,
  type Synthesized,
  synthExporter,
} from './helpers.js';

const BASE = { apiBaseUrl: 'https://api.acme.test' };

/** The sizes a large backfill might ask for. */
const SIZED = {
  startRunMemoryMb: '1024',
  planCampaignMemoryMb: 768,
  planCampaignTimeoutSeconds: 900,
  exportReportsMemoryMb: 2048,
  exportReportsTimeoutSeconds: 600,
  finishRunMemoryMb: 3008,
  finishRunTimeoutSeconds: 840,
};

let defaults: Synthesized;
let sized: Synthesized;

beforeAll(() => {
  defaults = synthExporter({});
  sized = synthExporter(SIZED);
});

afterAll(removeSynthOutputs);

/** Each function's MemorySize and Timeout in a template. */
function sizesOf(s: Synthesized): Record<FunctionName, { memory: unknown; timeout: unknown }> {
  const ids = functionIds(s.template);
  const fns = resourcesOf(s.template, 'AWS::Lambda::Function');
  return Object.fromEntries(
    FUNCTION_NAMES.map((name) => {
      const props = fns[ids[name]]!.Properties;
      return [name, { memory: props.MemorySize, timeout: props.Timeout }];
    }),
  ) as Record<FunctionName, { memory: unknown; timeout: unknown }>;
}

const visibilityOf = (s: Synthesized, idPrefix: string): unknown =>
  resourcesOf(s.template, 'AWS::SQS::Queue')[logicalIdOf(s.template, 'AWS::SQS::Queue', idPrefix)]!.Properties
    .VisibilityTimeout;

const outputValue = (s: Synthesized, name: string): unknown =>
  (s.template.toJSON() as { Outputs: Record<string, { Value: unknown }> }).Outputs[name]?.Value;

describe('function memory and timeouts', () => {
  it("keeps today's sizes by default", () => {
    expect(sizesOf(defaults)).toEqual({
      'start-run': { memory: 512, timeout: 300 },
      'plan-campaign': { memory: 512, timeout: 300 },
      'export-reports': { memory: 768, timeout: 300 },
      'finish-run': { memory: 1024, timeout: 900 },
    });
  });

  it('applies each setting to its function, and outputs it', () => {
    expect(sizesOf(sized)).toEqual({
      // start-run's timeout is the grace finish-run gives a start: not a setting.
      'start-run': { memory: 1024, timeout: 300 },
      'plan-campaign': { memory: 768, timeout: 900 },
      'export-reports': { memory: 2048, timeout: 600 },
      'finish-run': { memory: 3008, timeout: 840 },
    });
    for (const [key, value] of Object.entries(SIZED))
      expect(outputValue(sized, key.charAt(0).toUpperCase() + key.slice(1)), key).toBe(String(value));
  });

  it("derives each queue's visibility from its consumer's configured timeout (6 x)", () => {
    expect(visibilityOf(defaults, 'QueuesPlanQueue')).toBe(6 * 300);
    expect(visibilityOf(defaults, 'QueuesReportQueue')).toBe(6 * 300);
    expect(visibilityOf(sized, 'QueuesPlanQueue')).toBe(6 * 900);
    expect(visibilityOf(sized, 'QueuesReportQueue')).toBe(6 * 600);
  });

  it.each([
    [
      'finishRunMemoryMb',
      64,
      /context "finishRunMemoryMb": expected an integer from 128 to 10240 \(default 1024\)/,
    ],
    [
      'startRunMemoryMb',
      20_000,
      /context "startRunMemoryMb": expected an integer from 128 to 10240 \(default 512\)/,
    ],
    [
      'finishRunTimeoutSeconds',
      901,
      /context "finishRunTimeoutSeconds": expected an integer from 60 to 900 \(default 900\)/,
    ],
    [
      'planCampaignTimeoutSeconds',
      '5 minutes',
      /context "planCampaignTimeoutSeconds": expected an integer from 60/,
    ],
    ['exportReportsTimeoutSeconds', 30, /context "exportReportsTimeoutSeconds": expected an integer from 60/],
  ])('refuses %s = %j naming the key and its range', (key, value, message) => {
    expect(() => parseConfig({ ...BASE, [key]: value })).toThrow(InfraConfigError);
    expect(() => parseConfig({ ...BASE, [key]: value })).toThrow(message);
  });

  it('refuses an export-reports timeout too short for its batch at the rate, naming the key that helps', () => {
    expect(() => synthExporter({ exportReportsTimeoutSeconds: 60, reportBatchSize: 5 })).toThrow(
      /more than 20 s \(a third of export-reports' timeout\): .* or raise rateCeiling or exportReportsTimeoutSeconds/,
    );
  });

  it('refuses an API function memory that cannot read an answer of maxBodyMiB, naming its memory key', () => {
    expect(() => synthExporter({ planCampaignMemoryMb: 256, maxBodyMiB: 128 })).toThrow(
      /more than the 256 MB of plan-campaign \("planCampaignMemoryMb"\): give at most 64, or more memory/,
    );
  });
});
