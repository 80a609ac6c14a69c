// Launching workloads under the lens allocator (no vscode import): the workload's environment and command
// line, interpreter fallback, the terminal wrapper. Used by the extension's launcher and the CLI; the session
// folder a launch creates is ../sessionFolder's.
export { buildWorkloadEnv, prependPath, validateSettings } from './env';
export type { RecordingSettings, SegmentStrategy, Backend, WorkloadEnvOptions } from './env';
export { buildCommand, expandLaunchTemplate, splitShellWords, shellQuote, toShellLine } from './command';
export type { Command, Target } from './command';
export { findPython, which } from './interpreter';
export { EXIT_NOTE, terminalEnv, terminalShellLine } from './terminal';
export { installPaths, locateInstall } from './install';
export type { InstallPaths } from './install';
export { buildObserver, observerBuildCommand, parseObserverBuildLine, startObserverBuildAhead } from './observerBuild';
export type { ObserverBuildCommand, ObserverBuildResult, ObserverBuildStart } from './observerBuild';
