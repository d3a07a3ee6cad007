package interceptor

import (
	controlv1 "msgexchange/proto/gen/go/msgx/control/v1"
	"msgexchange/services/control/internal/caller"
)

// methodRoles is the role each method needs (R-H9). A method missing here
// is refused to everyone: a method added to a service without a decision
// about who may call it stays closed (a test checks that every served
// method has an entry). The service credential calls only the lease term
// methods; operators read with read and repair with operate.
var methodRoles = map[string]caller.Role{
	controlv1.LeaseService_Acquire_FullMethodName:      caller.Service,
	controlv1.LeaseService_Renew_FullMethodName:        caller.Service,
	controlv1.LeaseService_Release_FullMethodName:      caller.Service,
	controlv1.LeaseService_List_FullMethodName:         caller.Read,
	controlv1.LeaseService_ForceRelease_FullMethodName: caller.Operate,

	controlv1.AdminService_GetMessage_FullMethodName:             caller.Read,
	controlv1.AdminService_GetBacklog_FullMethodName:             caller.Read,
	controlv1.AdminService_GetFlight_FullMethodName:              caller.Read,
	controlv1.AdminService_ListOutbox_FullMethodName:             caller.Read,
	controlv1.AdminService_ListAbandonedBackfills_FullMethodName: caller.Read,
	controlv1.AdminService_ListParkedKeys_FullMethodName:         caller.Read,
	controlv1.AdminService_GetRebuild_FullMethodName:             caller.Read,
	controlv1.AdminService_ListMessages_FullMethodName:           caller.Read,
	controlv1.AdminService_RequeueOutbox_FullMethodName:          caller.Operate,
	controlv1.AdminService_ResendOutbox_FullMethodName:           caller.Operate,
	controlv1.AdminService_RebuildProjection_FullMethodName:      caller.Operate,
	controlv1.AdminService_EndMessage_FullMethodName:             caller.Operate,
	controlv1.AdminService_DiscardOutbox_FullMethodName:          caller.Operate,
	controlv1.AdminService_AcknowledgeBackfills_FullMethodName:   caller.Operate,

	controlv1.InspectService_GetFlightTrail_FullMethodName:      caller.Read,
	controlv1.InspectService_GetArchivedFlight_FullMethodName:   caller.Read,
	controlv1.InspectService_ListReferenceData_FullMethodName:   caller.Read,
	controlv1.InspectService_ListSeasonSchedules_FullMethodName: caller.Read,
	controlv1.InspectService_GetSeasonSchedule_FullMethodName:   caller.Read,
	controlv1.InspectService_ListAudit_FullMethodName:           caller.Read,
	controlv1.InspectService_ListSnapshotLog_FullMethodName:     caller.Read,
	controlv1.InspectService_ListMailboxReuse_FullMethodName:    caller.Read,
	controlv1.InspectService_CheckConsistency_FullMethodName:    caller.Read,
	controlv1.InspectService_GetDatabaseStatus_FullMethodName:   caller.Read,

	controlv1.MaintenanceService_ListMaintenanceRuns_FullMethodName:   caller.Read,
	controlv1.MaintenanceService_GetMaintenanceRequest_FullMethodName: caller.Read,
	controlv1.MaintenanceService_RequestMaintenance_FullMethodName:    caller.Operate,
	// A census writes nothing, but each one makes the shared mailbox, which
	// the airport's other systems use, count its table: a reader's token
	// must not be able to load a database it does not own. Reading a
	// census's figures is harmless.
	controlv1.MaintenanceService_RequestMailboxCensus_FullMethodName: caller.Operate,
	controlv1.MaintenanceService_GetMailboxCensus_FullMethodName:     caller.Read,

	controlv1.ReplayService_Preview_FullMethodName:            caller.Read,
	controlv1.ReplayService_GetReplayRequest_FullMethodName:   caller.Read,
	controlv1.ReplayService_ListReplayRequests_FullMethodName: caller.Read,
	controlv1.ReplayService_Execute_FullMethodName:            caller.Operate,

	controlv1.RequestService_ListRequests_FullMethodName: caller.Read,
	controlv1.RequestService_SendRQFD_FullMethodName:     caller.Operate,
	controlv1.RequestService_SendRQRD_FullMethodName:     caller.Operate,
}

// RequiredRole returns the role fullMethod needs, ok false for a method
// nobody may call.
func RequiredRole(fullMethod string) (caller.Role, bool) {
	r, ok := methodRoles[fullMethod]
	return r, ok
}
