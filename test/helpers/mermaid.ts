/**
 * A small reader of the Mermaid the docs write (flowcharts: nodes, edges, subgraphs), for the
 * test that holds the diagrams to the synthesized template (test/infra/diagrams.test.ts, which
 * states the conventions). It reads which resources a diagram names, nothing of its layout.
 */

/** What a checked diagram promises: every name exists (`subset`), and none is missing (`complete`). */
export const CHECK_MODES = ['complete', 'subset'] as const;
export type CheckMode = (typeof CHECK_MODES)[number];

/** The node-id prefixes that say what a node names; other nodes are pictures only. */
export const NODE_KINDS = {
  fn_: 'function',
  q_: 'queue',
  sch_: 'schedule',
  tbl_: 'table',
} as const;
export type NodeKind = (typeof NODE_KINDS)[keyof typeof NODE_KINDS];

/** A node whose id has a kind prefix, with the resource names its label gives. */
export interface KindNode {
  readonly id: string;
  readonly kind: NodeKind;
  readonly names: readonly string[];
  /** The label as written (HTML and all). */
  readonly label: string;
}

/** A ```mermaid block of a Markdown file. */
export interface MermaidBlock {
  /** `docs/topology.md:42`: the file and the line of the opening fence. */
  readonly where: string;
  readonly source: string;
}

export interface ParsedDiagram {
  readonly check: CheckMode | undefined;
  readonly nodes: readonly KindNode[];
  /** What keeps the diagram from being checked: no marker, not a flowchart, a label that is no name. */
  readonly problems: readonly string[];
}

const MARKER = /^%%\s*checked:\s*(.*?)\s*$/;
const HEADER = /^(flowchart|graph)(\s+(TB|TD|BT|LR|RL))?\s*;?$/;
/** Lines that declare no node: layout, styling, interaction, the end of a subgraph. */
const NO_NODES = /^(end|direction|classDef|class|style|linkStyle|click)\b/;
/** Shape openers, longest first, and the text that closes each (for an unquoted label). */
const SHAPES: readonly (readonly [string, string])[] = [
  ['(((', ')))'],
  ['[[', ']]'],
  ['[(', ')]'],
  ['([', '])'],
  ['((', '))'],
  ['{{', '}}'],
  ['[/', ']'],
  ['[\\', ']'],
  ['[', ']'],
  ['(', ')'],
  ['{', '}'],
  ['>', ']'],
];
/** A resource name: a word of letters, digits, `_` and `-`, starting with a letter. */
const NAME = /^[A-Za-z][\w-]*$/;

/** The names a label gives: its first line, less a leading mark (`λ `), split on `·` or `,`. */
export function namesOf(label: string): string[] {
  const firstLine = label.split(/<br\s*\/?>/i)[0]!;
  const text = firstLine
    .replace(/<[^>]*>/g, '')
    .replace(/&(amp|lt|gt|quot|#quot);/g, ' ')
    .replace(/^[^A-Za-z0-9_]+/, '');
  return text
    .split(/[·,]/)
    .map((name) => name.trim())
    .filter((name) => name !== '');
}

/** The kind a node id's prefix gives, if any. */
function kindOf(id: string): NodeKind | undefined {
  const prefix = Object.keys(NODE_KINDS).find((p) => id.startsWith(p)) as keyof typeof NODE_KINDS | undefined;
  return prefix === undefined ? undefined : NODE_KINDS[prefix];
}

/** Reads a diagram's marker and its kind nodes (the first label of each id; a second must agree). */
export function parseDiagram(source: string): ParsedDiagram {
  const problems: string[] = [];
  const lines = source.split('\n').map((line) => line.trim());
  const first = lines.findIndex((line) => line !== '');
  const marker = MARKER.exec(lines[first] ?? '')?.[1];
  let check: CheckMode | undefined;
  if (marker === undefined) {
    problems.push(`no marker: the block's first line must be "%% checked: complete" or "%% checked: subset"`);
  } else if ((CHECK_MODES as readonly string[]).includes(marker)) {
    check = marker as CheckMode;
  } else {
    problems.push(`marker "checked: ${marker}": expected ${CHECK_MODES.join(' or ')}`);
  }
  const body = lines.slice(first).filter((line) => line !== '' && !line.startsWith('%%'));
  if (!HEADER.test(body[0] ?? '')) {
    problems.push(`"${body[0] ?? ''}": only flowcharts are read (flowchart TB, LR, …)`);
    return { check, nodes: [], problems };
  }

  const labels = new Map<string, string>();
  for (const line of body.slice(1)) {
    if (NO_NODES.test(line)) continue;
    for (const { id, label } of nodesOfLine(line.replace(/^subgraph\s+\S+.*$/, ''))) {
      const before = labels.get(id);
      if (before === undefined) labels.set(id, label);
      else if (before !== label) problems.push(`${id} has two labels: "${before}" and "${label}"`);
    }
  }
  const nodes: KindNode[] = [];
  for (const id of idsOfKind(body.slice(1))) {
    const kind = kindOf(id)!;
    const label = labels.get(id);
    if (label === undefined) {
      problems.push(`${id} has no label: give it one that names the ${kind}`);
      continue;
    }
    const names = namesOf(label);
    const bad = names.filter((name) => !NAME.test(name));
    if (names.length === 0 || bad.length > 0) {
      problems.push(
        `${id}["${label}"]: the first line of the label must name the ${kind}(s), separated by "·" (` +
          `${bad.length > 0 ? `"${bad.join('", "')}" is no name` : 'none found'}); put prose after a <br/>`,
      );
      continue;
    }
    nodes.push({ id, kind, names, label });
  }
  return { check, nodes, problems };
}

/** The nodes a line defines with a label: `id["label"]`, `id[(label)]`, `id(["label"])`, … */
function nodesOfLine(line: string): { id: string; label: string }[] {
  // Quoted text first, so that nothing inside a label or an edge label reads as a node.
  const quoted: string[] = [];
  const masked = line
    .replace(/"([^"]*)"/g, (_m, text: string) => `"${quoted.push(text) - 1}"`)
    .replace(/\|[^|]*\|/g, ' ');
  const out: { id: string; label: string }[] = [];
  const idAt = /(?:^|[\s&;>\-.=])([A-Za-z_][\w]*)(?=[[({>])/g;
  for (const match of masked.matchAll(idAt)) {
    const id = match[1]!;
    const start = match.index + match[0].length;
    const shape = SHAPES.find(([open]) => masked.startsWith(open, start));
    if (shape === undefined) continue;
    const [open, closer] = shape;
    const rest = masked.slice(start + open.length);
    const placeholder = /^"(\d+)"/.exec(rest);
    if (placeholder !== null) {
      out.push({ id, label: quoted[Number(placeholder[1])]! });
    } else {
      const end = rest.indexOf(closer[0]!);
      out.push({ id, label: (end === -1 ? rest : rest.slice(0, end)).replace(/[/\\]$/, '').trim() });
    }
  }
  return out;
}

/** Every id with a kind prefix the lines mention (defined, or only in an edge), in order. */
function idsOfKind(lines: readonly string[]): string[] {
  const ids = new Set<string>();
  for (const line of lines) {
    if (NO_NODES.test(line) || line.startsWith('subgraph')) continue;
    const masked = line.replace(/"[^"]*"/g, '""').replace(/\|[^|]*\|/g, ' ');
    for (const match of masked.matchAll(/(?<![\w])([A-Za-z_]\w*)/g)) {
      if (kindOf(match[1]!) !== undefined) ids.add(match[1]!);
    }
  }
  return [...ids];
}

/** The names of each kind a template holds (or a test's stand-in for one). */
export type Catalogue = Readonly<Record<NodeKind, ReadonlySet<string>>>;

/**
 * What is wrong with a diagram against `catalogue`: what keeps it from being read, every name it
 * gives that the catalogue lacks, and, for a complete diagram, every name of the catalogue it
 * leaves out. Empty when the diagram is true.
 */
export function diagramProblems(parsed: ParsedDiagram, catalogue: Catalogue): string[] {
  const problems = [...parsed.problems];
  const named = new Set<string>();
  for (const node of parsed.nodes) {
    for (const name of node.names) {
      named.add(`${node.kind}:${name}`);
      const known = catalogue[node.kind];
      if (!known.has(name)) {
        problems.push(
          `${node.id}: no ${node.kind} "${name}" in the template (it has ${[...known].sort().join(', ')})`,
        );
      }
    }
  }
  if (parsed.check === 'complete') {
    for (const kind of Object.values(NODE_KINDS)) {
      for (const name of [...catalogue[kind]].sort()) {
        if (!named.has(`${kind}:${name}`))
          problems.push(`${kind} "${name}" is in the template but not in this complete diagram`);
      }
    }
  }
  return problems;
}
