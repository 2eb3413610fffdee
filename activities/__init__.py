"""Temporal activities and the adapters behind them: everything that touches the world."""

from activities.inference import InferenceActivities
from activities.policy import PolicyActivities
from activities.tools import ToolActivities

__all__ = ["InferenceActivities", "PolicyActivities", "ToolActivities"]
