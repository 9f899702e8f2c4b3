; Inno Setup script for the Windows installer of Agenvoy Desktop.
; Builds from the frozen app that `make dist` (PyInstaller, packaging/agenvoy-desktop.spec)
; writes to dist\agenvoy-desktop.  Compile on Windows with:
;   iscc /DAppVersion=<version from pyproject.toml> installer.iss
; tests/test_packaging.py checks that every path named here exists in that layout and
; that the default version below matches pyproject.toml.

#ifndef AppVersion
  #define AppVersion "0.1.0"
#endif
#define AppExe "agenvoy-desktop.exe"
#define DataFolder "AgenvoyDesktop"

[Setup]
AppId={{7C1F3A52-5E0B-4A63-9C1D-4A6E7601D35E}
AppName=Agenvoy Desktop
AppVersion={#AppVersion}
AppVerName=Agenvoy Desktop {#AppVersion}
AppPublisher=Agenvoy
; Per-user by default (no administrator rights); the dialog offers all users.
PrivilegesRequired=lowest
PrivilegesRequiredOverridesAllowed=dialog
DefaultDirName={autopf}\Agenvoy Desktop
DefaultGroupName=Agenvoy Desktop
DisableProgramGroupPage=yes
SetupIconFile=resources\icons\agenvoy-desktop.ico
UninstallDisplayIcon={app}\{#AppExe}
OutputDir=dist
OutputBaseFilename=AgenvoyDesktopSetup-{#AppVersion}
Compression=lzma2
SolidCompression=yes
WizardStyle=modern
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible

[Tasks]
Name: "desktopicon"; Description: "{cm:CreateDesktopIcon}"; GroupDescription: "{cm:AdditionalIcons}"; Flags: unchecked

[Files]
Source: "dist\agenvoy-desktop\*"; DestDir: "{app}"; Flags: recursesubdirs ignoreversion createallsubdirs

[Icons]
Name: "{group}\Agenvoy Desktop"; Filename: "{app}\{#AppExe}"; IconFilename: "{app}\{#AppExe}"
Name: "{group}\Uninstall Agenvoy Desktop"; Filename: "{uninstallexe}"
Name: "{autodesktop}\Agenvoy Desktop"; Filename: "{app}\{#AppExe}"; Tasks: desktopicon

[Run]
; Prepare the local models from the files inside the bundle (the installer's progress page
; shows the status line while it runs), then offer to start the app.
Filename: "{app}\{#AppExe}"; Parameters: "setup"; Flags: runhidden waituntilterminated; StatusMsg: "Preparing the local models (this takes a minute)..."
Filename: "{app}\{#AppExe}"; Description: "{cm:LaunchProgram,Agenvoy Desktop}"; Flags: nowait postinstall skipifsilent

[Code]
{ The uninstaller keeps the user's memory unless they say otherwise: conversations,
  summaries, error memory, documents' indexes and prepared models live in
  %LOCALAPPDATA%\AgenvoyDesktop, outside {app}. }
procedure CurUninstallStepChanged(CurUninstallStep: TUninstallStep);
var
  Data: String;
begin
  if CurUninstallStep = usPostUninstall then
  begin
    Data := ExpandConstant('{localappdata}\{#DataFolder}');
    if DirExists(Data) and not UninstallSilent then
      if MsgBox('Also delete your conversations, memory and prepared models?' + #13#10 + #13#10 +
                Data + #13#10 + #13#10 +
                'Choose No to keep them for a later installation.',
                mbConfirmation, MB_YESNO or MB_DEFBUTTON2) = IDYES then
        DelTree(Data, True, True, True);
  end;
end;
