// The assistant's tools (Note [Tool contract] in ./tools.ts): one table, one call, two adapters.
export { TOOLS, toolNamed, type ToolDeclaration, type JsonSchema } from './tools';
export { AssistantTools, answerText, type AssistantHost } from './assistant';
export { ToolError } from './answers/toolError';
export type { LiveLookup, LiveProcess, LiveTarget } from './recordings';
export { liveOfSessionRoot } from './sessionRoot';
