import { describe, expect, it } from 'vitest';
import { formatPath, issuesOf } from '../../../shared/api/outcome.js';
import { ReportResponseSchema } from '../../../shared/api/schemas.js';
import { reportData } from './fixtures.js';

type Section = { questions: unknown[]; inputs: unknown[] };

function issuesFor(mutate: (sections: Section[]) => void) {
  const data = reportData();
  mutate(data.sections as Section[]);
  const parsed = ReportResponseSchema.safeParse({ data });
  if (parsed.success) throw new Error('expected the mutated report to fail');
  return issuesOf(parsed.error);
}

describe('formatPath', () => {
  it('writes keys with dots and indexes in brackets', () => {
    expect(formatPath(['data', 'sections', 3, 'questions', 0, 'response'])).toBe(
      'data.sections[3].questions[0].response',
    );
    expect(formatPath([])).toBe('');
    expect(formatPath([0, 'id'])).toBe('[0].id');
  });
});

describe('issuesOf', () => {
  it('points into the closest variant of a union, not at the whole item', () => {
    const issues = issuesFor((sections) => {
      const question = sections[0]?.questions[0] as Record<string, unknown>;
      question.response = 42;
    });

    expect(issues).toEqual([
      expect.objectContaining({ path: 'data.sections[0].questions[0].response', code: 'invalid_type' }),
    ]);
  });

  it('names a missing field of a text entry inside questions[]', () => {
    const issues = issuesFor((sections) => {
      sections[0]?.questions.push({ type: 'text_entry', description: null });
    });

    expect(issues.map((i) => i.path)).toEqual(['data.sections[0].questions[4].answer']);
  });

  it('reports an item of the wrong kind at the item', () => {
    const issues = issuesFor((sections) => {
      sections[0]?.inputs.push(7);
    });

    expect(issues).toHaveLength(1);
    expect(issues[0]?.path).toBe('data.sections[0].inputs[3]');
    expect(issues[0]?.code).toBe('invalid_union');
  });
});
