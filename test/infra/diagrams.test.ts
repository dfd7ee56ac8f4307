/**
 * The reader of the docs' Mermaid diagrams (test/helpers/mermaid.ts), on inline diagrams.
 */
import { describe, expect, it } from 'vitest';
import { type Catalogue, diagramProblems, mermaidBlocks, namesOf, parseDiagram } from '../helpers/mermaid.js';

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

  it('finds each mermaid block of a Markdown file with the line it opens on', () => {
    const markdown = [
      '# t',
      '```mermaid',
      '%% checked: subset',
      '```',
      '',
      '```ts',
      'x',
      '```',
      '```mermaid',
      'a',
    ];
    expect(mermaidBlocks(markdown.join('\n'), 'doc.md')).toEqual([
      { where: 'doc.md:2', source: '%% checked: subset' },
      { where: 'doc.md:9', source: 'a' },
    ]);
    expect(namesOf('⏰ IncrementalRun, FinishRuns<br/>cron')).toEqual(['IncrementalRun', 'FinishRuns']);
  });
});
