"""``torch._dynamo.exc``: the errors compile raises, as PyTorch names them (all
RuntimeErrors): ``Unsupported`` for what ``fullgraph=True`` cannot capture,
``RecompileError`` for a recompile with ``config.error_on_recompile`` set,
``FailOnRecompileLimitHit`` at the recompile limit with ``config.fail_on_recompile_limit_hit``."""


class TorchDynamoException(RuntimeError):
    """Base of the compiler's errors."""


class Unsupported(TorchDynamoException):
    """Code that cannot be captured in one graph (a graph break under ``fullgraph=True``)."""


class RecompileError(TorchDynamoException):
    """A recompile where the stance forbids one."""


class FailOnRecompileLimitHit(Exception):
    """The recompile limit was reached with ``config.fail_on_recompile_limit_hit`` set (not a
    RuntimeError, as PyTorch's)."""


class TorchRuntimeError(TorchDynamoException):
    """An error raised by an operation while compiling."""


class InternalTorchDynamoError(TorchDynamoException):
    """An error of the compiler itself."""


class BackendCompilerFailed(TorchDynamoException):
    """The backend failed to compile a graph."""
