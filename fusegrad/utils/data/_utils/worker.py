"""``torch.utils.data._utils.worker``: fusegrad's ``utils.data.worker``, under PyTorch's path."""
from ..worker import WorkerInfo, get_worker_info

__all__ = ["WorkerInfo", "get_worker_info"]
