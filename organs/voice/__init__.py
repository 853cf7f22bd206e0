# Offline English voice for the speaker organ: Speech(text, rate=11025) is an audio job.
from .speech import Speech

__all__ = ["Speech"]
