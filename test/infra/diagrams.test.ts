/**
 * The Mermaid diagrams of the docs hold to the synthesized template, so that they cannot drift.
 *
 * Every ```mermaid block of README.md and docs/*.md is checked, a diagram added later included.
 * Its first line says how; a block without one fails:
 *   %% checked: complete   every Lambda function, SQS queue, Scheduler schedule and Glue table
 *                          (views included) of the template is named, and every name exists;
 *   %% checked: subset     every name exists.
 * Diagrams are flowcharts (`flowchart TB`, `LR`, …); edge labels are written `-->|text|`.
 *
 * A node's id prefix says what its label names; nodes with other ids (S3, the API, the event
 * bus, …) are pictures only:
 *   fn_   exporter functions, by their FUNCTION_NAMES name   fn_start["λ start-run"]
 *   q_    queues, by construct id (the console's queue name   q_plan[["PlanQueue"]]
 *         holds it: CampaignReportExporter-QueuesPlanQueue…)
 *   sch_  schedules, by construct id                          sch_finish(["⏰ FinishRuns"])
 *   tbl_  Glue tables and views, by TableInput.Name           tbl_json[("raw_reports · runs")]
 * The label's first line (up to the first <br/>) holds the names, several separated by "·" or
 * ","; a leading mark such as "λ " or "⏰ " is decoration, and later lines are prose.
 *
 * The template is the default (hive) stack with the optional full-refresh schedule set, so that
 * the complete diagram proves that schedule too. CDK's own helper functions (log retention,
 * auto-delete, bucket notifications) are singletons at the stack's root, outside the exporter
 * construct: they are not the exporter's functions and are left out.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { CfnResource } from 'aws-cdk-lib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FUNCTION_NAMES } from '../../infra/constructs/functions.js';
import { codeBlocks, docsFiles, readMarkdown } from '../helpers/markdown.js';
import {
  type Catalogue,
  diagramProblems,
  type MermaidBlock,
  type NodeKind,
  namesOf,
  parseDiagram,
} from '../helpers/mermaid.js';
import { removeSynthOutputs, resourcesOf, type Synthesized, synthExporter } from './helpers.js';

const ROOT = new URL('../../', import.meta.url);
const read = (file: string) => readFileSync(new URL(file, ROOT), 'utf8');

/** Every ```mermaid block of README.md and docs/, with the file and the line of its fence. */
function mermaidBlocks(): MermaidBlock[] {
  const root = fileURLToPath(ROOT);
  return docsFiles(root).flatMap((name) =>
    codeBlocks(readMarkdown(fileURLToPath(new URL(name, ROOT)), root))
      .filter((block) => block.lang === 'mermaid')
      .map((block) => ({ where: `${name}:${block.line}`, source: block.value })),
  );
}
const BLOCKS = mermaidBlocks();
/** Any valid cron: the schedule only has to exist. */
const FULL_REFRESH_CRON = '0 3 ? * SUN *';

const RESOURCE_KINDS: Readonly<Record<string, NodeKind>> = {
  'AWS::Lambda::Function': 'function',
  'AWS::SQS::Queue': 'queue',
  'AWS::Scheduler::Schedule': 'schedule',
  'AWS::Glue::Table': 'table',
};

/** The names of the exporter's functions, queues, schedules and Glue tables in the template. */
function catalogueOf({ stack, template }: Synthesized): Catalogue {
  const { exporter } = stack;
  const constructs = new Map(
    stack.node
      .findAll()
      .filter(CfnResource.isCfnResource)
      .map((c) => [stack.getLogicalId(c), c]),
  );
  const functionNames = new Map(
    FUNCTION_NAMES.map((n) => [exporter.functions.byName[n].node.defaultChild, n]),
  );
  const catalogue: Record<NodeKind, Set<string>> = {
    function: new Set(),
    queue: new Set(),
    schedule: new Set(),
    table: new Set(),
  };
  for (const [type, kind] of Object.entries(RESOURCE_KINDS)) {
    for (const [logicalId, resource] of Object.entries(resourcesOf(template, type))) {
      const construct = constructs.get(logicalId);
      if (construct === undefined) throw new Error(`${type} ${logicalId}: no construct has this logical id`);
      // The L2 construct around the resource (`Resource`) carries the id the code gives it.
      const ownId = construct.node.scope!.node.id;
      let name: string;
      if (kind === 'table') {
        name = (resource.Properties.TableInput as { Name: string }).Name;
      } else if (kind === 'function') {
        if (!construct.node.scopes.includes(exporter)) continue;
        name = functionNames.get(construct) ?? ownId;
      } else {
        name = ownId;
      }
      if (catalogue[kind].has(name)) throw new Error(`two ${kind}s of the template are named ${name}`);
      catalogue[kind].add(name);
    }
  }
  return catalogue;
}

describe('the diagram reader', () => {
  const catalogue: Catalogue = {
    function: new Set(['start-run', 'finish-run']),
    queue: new Set(['PlanQueue']),
    schedule: new Set(['FinishRuns']),
    table: new Set(['runs', 'raw_reports']),
  };
  const diagram = (check: string, ...lines: string[]) =>
    parseDiagram([`%% checked: ${check}`, 'flowchart TB', ...lines].join('\n'));

  it('reads the names of every shape, and leaves edge labels and unprefixed nodes alone', () => {
    const parsed = diagram(
      'complete',
      '  api[/"Integration API"/] -->|"calls fn_x(now)"| fn_a["λ start-run<br/>prose, not names"]',
      '  fn_a --> q_b[["PlanQueue"]] --> fn_c(finish-run)',
      '  subgraph tbl_group["Glue: not a node"]',
      '    tbl_d[("runs · raw_reports<br/>JSON Lines")]',
      '  end',
      '  sch_e(["⏰ FinishRuns"]) -.-> fn_c',
    );
    expect(parsed.problems).toEqual([]);
    expect(parsed.nodes.map((n) => [n.id, n.kind, n.names])).toEqual([
      ['fn_a', 'function', ['start-run']],
      ['q_b', 'queue', ['PlanQueue']],
      ['fn_c', 'function', ['finish-run']],
      ['tbl_d', 'table', ['runs', 'raw_reports']],
      ['sch_e', 'schedule', ['FinishRuns']],
    ]);
    expect(diagramProblems(parsed, catalogue)).toEqual([]);
  });

  it('names a resource the template does not have', () => {
    const parsed = diagram('subset', 'fn_a["λ start-runn"] --> q_b[["PlanQueue"]]');
    expect(diagramProblems(parsed, catalogue)).toEqual([
      'fn_a: no function "start-runn" in the template (it has finish-run, start-run)',
    ]);
  });

  it('names what a complete diagram leaves out, and lets a subset leave it out', () => {
    const lines = ['fn_a["λ start-run"] --> q_b[["PlanQueue"]]', 'tbl_c[("runs")]', 'sch_d(["FinishRuns"])'];
    expect(diagramProblems(diagram('complete', ...lines), catalogue)).toEqual([
      'function "finish-run" is in the template but not in this complete diagram',
      'table "raw_reports" is in the template but not in this complete diagram',
    ]);
    expect(diagramProblems(diagram('subset', ...lines), catalogue)).toEqual([]);
  });

  it('fails a block without a marker, another diagram type, and a label that names nothing', () => {
    expect(parseDiagram('flowchart TB\n  fn_a["λ start-run"]').problems).toEqual([
      'no marker: the block\'s first line must be "%% checked: complete" or "%% checked: subset"',
    ]);
    expect(parseDiagram('%% checked: everything\nflowchart TB').problems[0]).toMatch(
      /expected complete or subset/,
    );
    expect(parseDiagram('%% checked: subset\nsequenceDiagram\n  A->>B: hi').problems[0]).toMatch(
      /only flowcharts/,
    );
    expect(diagram('subset', 'q_a[["the plan queue"]]', 'fn_b --> q_a').problems).toEqual([
      'q_a["the plan queue"]: the first line of the label must name the queue(s), separated by "·" ("the plan queue" is no name); put prose after a <br/>',
      'fn_b has no label: give it one that names the function',
    ]);
  });

  it('reads the names of a label: its first line, less a leading mark, split on · or ,', () => {
    expect(namesOf('⏰ IncrementalRun, FinishRuns<br/>cron')).toEqual(['IncrementalRun', 'FinishRuns']);
  });
});

describe('the diagrams of README.md and docs/', () => {
  let catalogue: Catalogue;
  beforeAll(() => {
    catalogue = catalogueOf(synthExporter({ fullRefreshCron: FULL_REFRESH_CRON }, { bundle: false }));
  });
  afterAll(removeSynthOutputs);

  it('include a complete one in docs/topology.md', () => {
    const complete = BLOCKS.filter((b) => parseDiagram(b.source).check === 'complete');
    expect(complete.map((b) => b.where.split(':')[0])).toContain('docs/topology.md');
  });

  it('see the exporter in the template: its four functions, the optional schedule, views', () => {
    expect([...catalogue.function].sort()).toEqual([...FUNCTION_NAMES].sort());
    expect(catalogue.schedule).toContain('FullRefreshRun');
    expect(catalogue.table).toContain('reports_latest');
  });

  it.each(BLOCKS)('$where names only what the template holds (and, if complete, all of it)', (block) => {
    expect(diagramProblems(parseDiagram(block.source), catalogue)).toEqual([]);
  });

  it('docs/topology.md says what each function, queue and schedule does, in a row of its own', () => {
    const rows = read('docs/topology.md')
      .split('\n')
      .map((line) => /^\| `([^`]+)` \|/.exec(line)?.[1])
      .filter((name) => name !== undefined);
    for (const kind of ['function', 'queue', 'schedule'] as const) {
      for (const name of catalogue[kind]) expect(rows, `${kind} ${name}`).toContain(name);
    }
  });
});
