// A tool's answer that is an error the caller can act on (a wrong path, an unreadable file, no running workload):
// the adapters hand its message to the model as the tool's error result (VS Code: a thrown Error; MCP: isError), and
// the host keeps serving. Anything else thrown is a bug and is reported as one, with its message.
export class ToolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ToolError';
  }
}
