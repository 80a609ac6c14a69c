// The first-run walkthrough's steps, named once: package.json's contributes.walkthroughs uses these ids and context
// keys (test/unit/walkthrough.test.mjs holds the two together), src/glue/walkthrough marks them done.

/** The steps in order: open the sample, run it, read its lines, open a snapshot, run a test budget. */
export const WALKTHROUGH_STEPS = ['sampleOpened', 'runStarted', 'linesShown', 'snapshotOpened', 'budgetRun'] as const;
export type WalkthroughStep = (typeof WALKTHROUGH_STEPS)[number];

/** The walkthrough's id as VS Code names it: publisher.name#id (package.json). */
export const WALKTHROUGH_ID = 'gpu-memory-lens.gpu-memory-lens#gpuMemoryLens.start';

/** The context key a step's completionEvents wait for (`onContext:<key>`). */
export function contextKey(step: WalkthroughStep): string {
  return `gpuMemoryLens.walkthrough.${step}`;
}

/** A step's id as VS Code names it (welcome.markStepComplete's argument). */
export function stepId(step: WalkthroughStep): string {
  return `${WALKTHROUGH_ID}#${step}`;
}

/** The files "Open Sample Training Script" copies from media/walkthrough/ into the folder, by its argument. */
export const SAMPLE_FILES = {
  script: 'gpumem_sample.py',
  test: 'test_gpumem_sample.py',
} as const;
export type SampleKind = keyof typeof SAMPLE_FILES;
